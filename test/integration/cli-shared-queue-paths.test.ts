// Two terminals in one folder with the same gateway, key and output root share one task queue, so each one's
// worker runs rows of the other's batch. One runs a CSV from another folder, with its results and videos
// elsewhere too: the other terminal's worker allows those folders because that run registered them
// (.vidbatch/allow/), instead of refusing them (PathNotAllowed) until a retry reaches the right process.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readManifest } from '../../src/results/manifest';
import { startSimulator, type Simulator } from '../../src/simulator/server';
import { background, exitAndOutput, FAST_POLL_FLAGS, manifestPathOf } from './cli-helpers';

let simulator: Simulator | undefined;
afterEach(async () => {
  await simulator?.close();
  simulator = undefined;
});

const KEY = 'sk-shared-queue-paths';
const ROWS = 20;
const REFUSED = /PathNotAllowed|outside the folders this worker may use/;

async function csv(path: string, words: string): Promise<void> {
  const lines = Array.from({ length: ROWS }, (_, i) => `r${i + 1},${words} ${i + 1}`);
  await writeFile(path, ['id,prompt', ...lines].join('\n') + '\n');
}

describe('two terminals in one folder sharing a queue', () => {
  it("each worker runs the other's rows with the folders the other's run allows", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-shared-'));
    const elsewhere = await mkdtemp(join(tmpdir(), 'vidbatch-shared-elsewhere-'));
    const results = join(elsewhere, 'results');
    const videos = join(elsewhere, 'videos');
    await mkdir(join(elsewhere, 'csvs'));
    const tag = randomUUID().slice(0, 8);
    await csv(join(dir, 'here.csv'), `a quiet harbour ${tag}`);
    const farCsv = join(elsewhere, 'csvs', 'far.csv');
    await csv(farCsv, `a distant mountain ${tag}`);
    simulator = await startSimulator({ apiKeys: [KEY], jobSeconds: 1, jobJitterSeconds: 0.5 });
    const env = { GATEWAY_BASE_URL: simulator.baseUrl, GATEWAY_API_KEY: KEY };

    // The first terminal owns the folder's embedded server; the second uses it and shares the queue.
    const here = background(['run', 'here.csv', ...FAST_POLL_FLAGS], { cwd: dir, env });
    await here.waitFor(/Started batch batch-[0-9a-f]{16}/, 120_000);
    const far = background(['run', farCsv, '--out-root', results, '--download', videos, ...FAST_POLL_FLAGS], {
      cwd: dir,
      env,
    });
    const [h, f] = await Promise.all([here.done, far.done]);

    expect(h.code, exitAndOutput(h)).toBe(0);
    expect(f.code, exitAndOutput(f)).toBe(0);
    expect(h.stdout).toMatch(new RegExp(`${ROWS} succeeded, 0 failed of ${ROWS}`));
    expect(f.stdout).toMatch(new RegExp(`${ROWS} succeeded, 0 failed of ${ROWS}`));

    // Every video where its run said: beside the manifest under ./out, and under --download.
    const hereManifest = manifestPathOf(h);
    expect(dirname(dirname(hereManifest))).toBe(join(dir, 'out'));
    const farManifest = manifestPathOf(f);
    expect(dirname(dirname(farManifest))).toBe(results);
    for (const [manifest, videoDir] of [
      [hereManifest, dirname(hereManifest)],
      [farManifest, join(videos, basename(dirname(farManifest)))],
    ] as const) {
      const rows = await readManifest(manifest);
      expect(rows).toHaveLength(ROWS);
      for (const row of rows) {
        expect(row.downloadError, row.rowId).toBeUndefined();
        expect(row.file).toBe(join(videoDir, `${row.rowId}.mp4`));
        expect(existsSync(row.file!)).toBe(true);
      }
    }

    // No worker refused a path on the way, neither in the terminals nor in the log files.
    expect(h.stdout + h.stderr).not.toMatch(REFUSED);
    expect(f.stdout + f.stderr).not.toMatch(REFUSED);
    const logs = join(dir, '.vidbatch', 'logs');
    for (const name of await readdir(logs).catch(() => [] as string[]))
      expect(await readFile(join(logs, name), 'utf8'), name).not.toMatch(REFUSED);
    // Both runs removed their registrations.
    expect(await readdir(join(dir, '.vidbatch', 'allow')).catch(() => [])).toEqual([]);
  }, 300_000);
});
