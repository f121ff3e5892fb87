import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TemporalCliNotFoundError } from '../../src/errors';
import { findTemporalCli, TEMPORAL_CLI_VERSION } from '../../src/dev-server/cli-binary';

async function fakeBinary(dir: string, name = 'temporal'): Promise<string> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, name);
  await writeFile(path, '#!/bin/sh\necho fake\n');
  await chmod(path, 0o755);
  return path;
}

describe('findTemporalCli', () => {
  let root = '';
  afterEach(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });
  const fresh = async () => (root = await mkdtemp(join(tmpdir(), 'vidbatch-cli-')));

  it('prefers TEMPORAL_CLI_PATH', async () => {
    const dir = await fresh();
    const explicit = await fakeBinary(join(dir, 'explicit'));
    await fakeBinary(join(dir, 'bin'));
    const found = await findTemporalCli({
      env: { TEMPORAL_CLI_PATH: explicit, PATH: join(dir, 'bin') },
      cacheDir: join(dir, 'cache'),
      provision: false,
    });
    expect(found).toEqual({ path: explicit, source: 'TEMPORAL_CLI_PATH' });
  });

  it('then looks on PATH', async () => {
    const dir = await fresh();
    const onPath = await fakeBinary(join(dir, 'bin'));
    const found = await findTemporalCli({
      env: { PATH: join(dir, 'bin') },
      cacheDir: join(dir, 'cache'),
      provision: false,
    });
    expect(found).toEqual({ path: onPath, source: 'PATH' });
  });

  it('then uses a copy provisioned earlier into the cache', async () => {
    const dir = await fresh();
    const cached = await fakeBinary(join(dir, 'cache', 'temporal-cli', TEMPORAL_CLI_VERSION));
    const found = await findTemporalCli({
      env: { PATH: '' },
      cacheDir: join(dir, 'cache'),
      provision: false,
    });
    expect(found).toEqual({ path: cached, source: 'cache' });
  });

  it('fails with a message listing every option when nothing works', async () => {
    const dir = await fresh();
    const error = await findTemporalCli({
      env: { TEMPORAL_CLI_PATH: join(dir, 'missing'), PATH: '' },
      cacheDir: join(dir, 'cache'),
      provision: false,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TemporalCliNotFoundError);
    const message = (error as Error).message;
    expect(message).toContain('TEMPORAL_CLI_PATH');
    expect(message).toContain('PATH');
    expect(message).toContain('go install');
    expect(message).toContain('internet');
  });

  it('reports a failed go build and SDK download instead of hanging', async () => {
    const dir = await fresh();
    // A `go` that fails at once, and no network for the SDK download: both must be reported.
    const bin = join(dir, 'bin');
    await mkdir(bin, { recursive: true });
    await writeFile(join(bin, 'go'), '#!/bin/sh\necho "go: no proxy" >&2\nexit 1\n');
    await chmod(join(bin, 'go'), 0o755);
    const error = await findTemporalCli({
      env: { PATH: bin, HOME: dir, TMPDIR: dir },
      cacheDir: join(dir, 'cache'),
      log: () => {},
    }).catch((e: unknown) => e);
    // On a machine with internet the SDK download may succeed; either way, no exception escapes unexplained.
    if (error instanceof TemporalCliNotFoundError) {
      expect(error.message).toMatch(/go install .* failed: go install exited with 1: go: no proxy/);
      expect(error.message).toMatch(/SDK download/);
    } else {
      expect(error).toMatchObject({ source: 'sdk download' });
    }
  });
});
