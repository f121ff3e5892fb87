import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { liveAllowances, registerAllowances, shareAllowances } from '../../src/dev-server/allowances';

let dir: string;
beforeEach(async () => {
  dir = join(await mkdtemp(join(tmpdir(), 'vidbatch-allow-')), 'allow');
});

/** A pid no process has any more: a child that ran and was reaped. */
const deadPid = () => spawnSync(process.execPath, ['-e', '']).pid;

const record = (pid: number, taskQueue: string, lists: Record<string, unknown>) =>
  JSON.stringify({ pid, taskQueue, input: [], out: [], download: [], ...lists });

describe('registerAllowances / liveAllowances', () => {
  it('a live session is seen by the workers of its queue only, and no more once it removed its file', async () => {
    const remove = await registerAllowances(dir, 'q@1', {
      input: ['/data/csvs'],
      out: ['/data/results'],
      download: ['/data/videos', 'relative/ignored'],
    });
    expect(await liveAllowances(dir, 'q@1')(true)).toEqual({
      input: ['/data/csvs'],
      out: ['/data/results'],
      download: ['/data/videos'],
    });
    expect(await liveAllowances(dir, 'q@2')(true)).toEqual({ input: [], out: [], download: [] });
    await remove();
    expect(await readdir(dir)).toEqual([]);
    expect(await liveAllowances(dir, 'q@1')(true)).toEqual({ input: [], out: [], download: [] });
  });

  it("ignores a dead process's file and removes it, and ignores files it cannot read", async () => {
    await mkdir(dir, { recursive: true });
    const dead = deadPid();
    await writeFile(join(dir, `${dead}-0.json`), record(dead, 'q', { input: ['/dead/csvs'] }));
    await writeFile(join(dir, `${dead}-1.tmp`), 'half a fi');
    await writeFile(join(dir, `${process.pid}-x.json`), 'not json');
    await writeFile(join(dir, `${process.pid}-y.json`), record(process.pid, 'q', { input: ['/live/csvs'] }));
    await writeFile(join(dir, 'notes.txt'), '/anything');
    expect(await liveAllowances(dir, 'q')(true)).toEqual({ input: ['/live/csvs'], out: [], download: [] });
    expect((await readdir(dir)).sort()).toEqual(
      [`${process.pid}-x.json`, `${process.pid}-y.json`, 'notes.txt'].sort(),
    );
  });

  it('registers nothing without folders, and no folder is no error', async () => {
    await (
      await registerAllowances(dir, 'q', { input: [] })
    )();
    expect(await liveAllowances(dir, 'q')(true)).toEqual({ input: [], out: [], download: [] });
  });

  it('serves a recent look from its cache; a fresh look sees a session registered since', async () => {
    let clock = 0;
    const lookup = liveAllowances(dir, 'q', { cacheMs: 1000, now: () => clock });
    expect((await lookup(false)).input).toEqual([]);
    const remove = await registerAllowances(dir, 'q', { input: ['/new/csvs'] });
    clock = 500;
    expect((await lookup(false)).input).toEqual([]); // cached
    expect((await lookup(true)).input).toEqual(['/new/csvs']);
    await remove();
    expect((await lookup(false)).input).toEqual(['/new/csvs']); // cached, briefly
    clock = 1600;
    expect((await lookup(false)).input).toEqual([]);
  });

  it('shareAllowances registers for the session, removed by its cleanups', async () => {
    const cleanups: (() => Promise<void>)[] = [];
    const { shared } = await shareAllowances(dir, 'q', { download: ['/videos'] }, cleanups);
    expect((await shared(true)).download).toEqual(['/videos']);
    for (const cleanup of cleanups) await cleanup();
    expect((await shared(true)).download).toEqual([]);
  });
});
