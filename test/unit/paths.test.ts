import { mkdir, mkdtemp, realpath, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  allowedFile,
  allowedPath,
  confine,
  confineFile,
  isWithin,
  realPathOf,
  type PathRoots,
} from '../../src/activities/paths';
import { loadWorkerSettings } from '../../src/config';
import { PathNotAllowedError } from '../../src/errors';

let base: string;
let roots: PathRoots;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), 'vidbatch-paths-')));
  for (const d of ['in', 'out', 'elsewhere', 'in-sibling']) await mkdir(join(base, d));
  await writeFile(join(base, 'in', 'a.csv'), 'prompt\nx\n');
  await writeFile(join(base, 'elsewhere', 'secret.csv'), 'prompt\ny\n');
  // Links inside the roots: one pointing out, one pointing to another place inside.
  await symlink(join(base, 'elsewhere'), join(base, 'in', 'escape'));
  await symlink(join(base, 'elsewhere', 'secret.csv'), join(base, 'in', 'secret-link.csv'));
  await symlink(join(base, 'elsewhere'), join(base, 'out', 'escape'));
  await symlink(join(base, 'in'), join(base, 'out', 'to-in'));
  roots = { input: [join(base, 'in')], out: [join(base, 'out')], download: [join(base, 'out')] };
});

const refused = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PathNotAllowedError);
  return err as PathNotAllowedError;
};

describe('isWithin', () => {
  it('is true for the root and what is under it, false for siblings sharing a prefix and parents', () => {
    expect(isWithin('/data/out', '/data/out')).toBe(true);
    expect(isWithin('/data/out/b/m.jsonl', '/data/out')).toBe(true);
    expect(isWithin('/data/out-other/x', '/data/out')).toBe(false);
    expect(isWithin('/data', '/data/out')).toBe(false);
    expect(isWithin('/data/out/..x', '/data/out')).toBe(true); // a name starting with two dots, not a climb
  });
});

describe('realPathOf', () => {
  it('resolves links in the existing part and keeps the missing tail', async () => {
    expect(await realPathOf(join(base, 'out', 'escape', 'new', 'm.jsonl'))).toBe(
      join(base, 'elsewhere', 'new', 'm.jsonl'),
    );
    expect(await realPathOf(join(base, 'in', 'a.csv'))).toBe(join(base, 'in', 'a.csv'));
  });
});

describe('confine', () => {
  it('allows files under the root, and folders that do not exist yet', async () => {
    expect(await confine(join(base, 'in', 'a.csv'), 'input', roots)).toBe(join(base, 'in', 'a.csv'));
    expect(await confine(join(base, 'out', 'batch-1', 'manifest.jsonl'), 'out', roots)).toBe(
      join(base, 'out', 'batch-1', 'manifest.jsonl'),
    );
  });

  it('refuses absolute paths elsewhere, naming the path, the root and the variable', async () => {
    const err = await refused(confine('/etc/passwd', 'input', roots));
    expect(err.message).toContain('/etc/passwd');
    expect(err.message).toContain(join(base, 'in'));
    expect(err.message).toContain('VIDBATCH_INPUT_ROOT');
    expect((await refused(confine('/tmp/x', 'out', roots))).message).toContain('VIDBATCH_OUT_ROOT');
    expect((await refused(confine('/tmp/x', 'download', roots))).message).toContain('VIDBATCH_DOWNLOAD_ROOT');
  });

  it('refuses climbing out with .., also into a sibling whose name starts like the root', async () => {
    await refused(confine(join(base, 'in', '..', 'elsewhere', 'secret.csv'), 'input', roots));
    await refused(confine(`${join(base, 'in')}/../in-sibling/x.csv`, 'input', roots));
    await refused(confine(join(base, 'out', 'batch', '..', '..', 'x'), 'out', roots));
  });

  it('refuses symlinks that lead out of the root, for files and for folders still to be made', async () => {
    await refused(confine(join(base, 'in', 'secret-link.csv'), 'input', roots));
    await refused(confine(join(base, 'in', 'escape', 'secret.csv'), 'input', roots));
    await refused(confine(join(base, 'out', 'escape', 'batch-1', 'manifest.jsonl'), 'out', roots));
    // Inside another root is still outside this kind's root.
    await refused(confine(join(base, 'out', 'to-in', 'x.mp4'), 'download', roots));
  });

  it('resolves a relative path against the working directory', async () => {
    await refused(confine('relative.csv', 'input', roots));
    expect(await confine('relative.csv', 'input', { ...roots, input: [process.cwd()] })).toBe(
      join(await realpath(process.cwd()), 'relative.csv'),
    );
  });
});

describe('confine with folders other processes allow (roots.shared)', () => {
  it('allows a path under a shared folder of its kind, as strictly as its own roots', async () => {
    const looks: boolean[] = [];
    const withShared: PathRoots = {
      ...roots,
      shared: (fresh) => {
        looks.push(fresh);
        return Promise.resolve({
          input: [join(base, 'elsewhere'), 'relative'],
          download: [join(base, 'in')],
        });
      },
    };
    expect(await confine(join(base, 'elsewhere', 'secret.csv'), 'input', withShared)).toBe(
      join(base, 'elsewhere', 'secret.csv'),
    );
    // Own roots first: no look at the others'.
    looks.length = 0;
    await confine(join(base, 'in', 'a.csv'), 'input', withShared);
    expect(looks).toEqual([]);
    // Refused after a look at the cached lists and one at fresh ones.
    await refused(confine(join(base, 'in-sibling', 'x.csv'), 'input', withShared));
    expect(looks).toEqual([false, true]);
    // Each kind its own folders; climbs and links out of a shared folder are refused.
    await refused(confine(join(base, 'elsewhere', 'x.mp4'), 'download', withShared));
    await refused(confine(join(base, 'elsewhere', '..', 'in-sibling', 'x.csv'), 'input', withShared));
    await refused(confine(join(base, 'in', 'escape', 'x.mp4'), 'download', withShared));
    await refused(confine('relative/x.csv', 'input', withShared));
  });

  it('takes a folder registered since the cached look: the miss looks again', async () => {
    const fresh = { input: [join(base, 'elsewhere')] };
    const withShared: PathRoots = { ...roots, shared: (f) => Promise.resolve(f ? fresh : {}) };
    expect(await confine(join(base, 'elsewhere', 'secret.csv'), 'input', withShared)).toBe(
      join(base, 'elsewhere', 'secret.csv'),
    );
  });
});

describe('confineFile (row ids as file names)', () => {
  it('allows a plain name and refuses names that climb, name folders or are empty', async () => {
    const dir = join(base, 'out', 'videos');
    expect(await confineFile(dir, 'r1.mp4', 'download', roots)).toBe(join(dir, 'r1.mp4'));
    for (const name of ['../x.mp4', '..', '.', '', 'a/b.mp4', `../../${'x'}.mp4`, 'a\0.mp4'])
      await refused(confineFile(dir, name, 'download', roots));
  });
});

describe('allowedPath / allowedFile (activities)', () => {
  it('turns a refusal into a PathNotAllowed failure that another worker may retry', async () => {
    const err = await allowedPath('/etc/passwd', 'input', roots).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: 'PathNotAllowed', nonRetryable: false });
    expect((err as Error).message).toContain('VIDBATCH_INPUT_ROOT');
    const file = await allowedFile(join(base, 'out'), '../x.mp4', 'download', undefined).catch(
      (e: unknown) => e,
    );
    expect(file).toMatchObject({ type: 'PathNotAllowed', nonRetryable: false });
  });

  it('without roots (a worker built without confinement) allows any path, but never a climbing file name', async () => {
    expect(await allowedPath('/etc/passwd', 'input', undefined)).toBe('/etc/passwd');
    expect(await allowedFile('/anywhere', 'r1.mp4', 'download', undefined)).toBe('/anywhere/r1.mp4');
  });
});

describe('loadWorkerSettings', () => {
  it('defaults: input = working directory + out root, out = ./out, downloads = out root, 30 s grace', () => {
    const s = loadWorkerSettings({}, undefined, '/srv/w');
    expect(s.roots).toEqual({
      input: ['/srv/w', '/srv/w/out'],
      out: ['/srv/w/out'],
      download: ['/srv/w/out'],
    });
    expect(s.outRoot).toBe('/srv/w/out');
    expect(s.shutdownGraceMs).toBe(30_000);
    expect(s.readyFile).toBeUndefined();
  });

  it('reads the roots, grace and ready file from the environment, relative to the working directory', () => {
    const s = loadWorkerSettings(
      {
        VIDBATCH_INPUT_ROOT: '/data/batches',
        VIDBATCH_OUT_ROOT: '/data/out',
        VIDBATCH_DOWNLOAD_ROOT: 'videos',
        VIDBATCH_SHUTDOWN_GRACE_MS: '1500',
        VIDBATCH_READY_FILE: 'ready',
      },
      undefined,
      '/srv/w',
    );
    expect(s.roots).toEqual({
      input: ['/data/batches', '/data/out'],
      out: ['/data/out'],
      download: ['/srv/w/videos'],
    });
    expect(s.shutdownGraceMs).toBe(1500);
    expect(s.readyFile).toBe('/srv/w/ready');
  });

  it('refuses a bad grace period naming the variable', () => {
    expect(() => loadWorkerSettings({ VIDBATCH_SHUTDOWN_GRACE_MS: 'soon' })).toThrow(
      /VIDBATCH_SHUTDOWN_GRACE_MS/,
    );
  });
});
