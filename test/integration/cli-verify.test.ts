// Verification of downloaded videos, end to end: a spawned `vidbatch simulator` with its video
// faults (truncated file, wrong resolution, wrong duration, each by prompt word), the real `vidbatch run
// --download` against it with this test's worker; checks the manifest rows' `verification`, what `status`
// and `results` print, `--verify strict` (rows end `video_mismatch`) and `retry-failed --code video_mismatch`
// (only those rows paid again, counted by the simulator).
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { previousInput } from '../../src/client/rerun';
import { readManifest } from '../../src/results/manifest';
import { background, vidbatch, type CliRun } from './cli-helpers';
import { testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
let simulator: ReturnType<typeof background> | undefined;
afterEach(async () => {
  await env?.close();
  await simulator?.stop();
  env = undefined;
  simulator = undefined;
});

const FAST = ['--first-poll', '0.3', '--poll-interval', '0.2', '--poll-cap', '1', '--no-adaptive-poll'];
const API_KEY = 'sk-verify-test';

/** `vidbatch simulator` on a free port with these flags; its base URL and admin origin. */
async function spawnSimulator(dir: string, flags: string[]) {
  simulator = background(
    [
      'simulator',
      '--port',
      '0',
      '--api-key',
      API_KEY,
      '--job-seconds',
      '0.4',
      '--job-jitter',
      '0.1',
      ...flags,
    ],
    { cwd: dir },
  );
  const baseUrl = (await simulator.waitFor(/export GATEWAY_BASE_URL=(\S+)/))[1]!;
  const origin = new URL(baseUrl).origin;
  return {
    baseUrl,
    stats: async () => (await (await fetch(`${origin}/admin/stats`)).json()) as { jobsCreated: number },
    setFaults: async (faults: Record<string, unknown>) => {
      const res = await fetch(`${origin}/admin/faults`, { method: 'POST', body: JSON.stringify(faults) });
      expect(res.status).toBe(200);
    },
  };
}

function cliEnv(e: TestEnv, baseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    TEMPORAL_ADDRESS: e.address,
    VIDBATCH_TASK_QUEUE: e.taskQueue,
    GATEWAY_BASE_URL: baseUrl,
    GATEWAY_API_KEY: API_KEY,
    ...extra,
  };
}

function manifestOf(r: CliRun): string {
  const path = /Manifest: (\S+manifest\.jsonl)/.exec(r.stdout)?.[1];
  if (!path) throw new Error(`no manifest in output:\n${r.stdout}\n${r.stderr}`);
  return path;
}

/**
 * Rows `[id, prompt, resolution, duration]`, each prompt tagged so this test's batch id is its own (files
 * given the same `tag` send the same requests).
 */
async function csv(
  path: string,
  rows: [string, string, string, number][],
  tag = randomUUID().slice(0, 8),
): Promise<void> {
  const lines = [
    'id,prompt,resolution,duration',
    ...rows.map(([id, p, r, d]) => `${id},${p} ${tag},${r},${d}`),
  ];
  await writeFile(path, lines.join('\n') + '\n');
}

describe('verification of downloaded videos from the command line', () => {
  it('flags a truncated file, a wrong resolution and a wrong duration on the rows; status and results say so', async () => {
    env = await testEnv();
    const sim = await spawnSimulator(env.dir, [
      ...['--truncated-words', 'shattered'],
      ...['--wrong-resolution-words', 'lowres'],
      ...['--wrong-duration-words', 'hurried'],
    ]);
    await env.startWorker({ baseUrl: sim.baseUrl, apiKey: () => API_KEY });
    await csv(join(env.dir, 'v.csv'), [
      ['ok', 'a calm lake at dawn', '720P', 5],
      ['cut', 'a shattered vase', '720P', 5],
      ['res', 'a lowres city at night', '1080P', 5],
      ['dur', 'a hurried fox', '480P', 10],
    ]);
    const env1 = cliEnv(env, sim.baseUrl);
    const r = await vidbatch(['run', 'v.csv', '--download', 'videos', ...FAST], { cwd: env.dir, env: env1 });
    // Flagged only: every row succeeded, nothing was paid twice.
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('4 succeeded, 0 failed of 4');
    expect((await sim.stats()).jobsCreated).toBe(4);
    const rows = Object.fromEntries((await readManifest(manifestOf(r))).map((row) => [row.rowId, row]));
    expect(rows.ok!.verification).toMatchObject({
      ok: true,
      width: 1280,
      height: 720,
      audio: true,
      problems: [],
    });
    expect(rows.ok!.verification!.durationSeconds).toBeCloseTo(5, 0);
    expect(rows.ok!.verification!.codec).toMatch(/^avc1\./);
    expect(rows.cut!.verification).toMatchObject({
      ok: false,
      problems: [expect.stringMatching(/^not a valid MP4: truncated: the mdat box/)],
    });
    expect(rows.res!.verification).toMatchObject({
      ok: false,
      height: 720,
      problems: ['height 720, asked 1080P'],
    });
    expect(rows.dur!.verification).toMatchObject({
      ok: false,
      height: 480,
      problems: ['duration 5.0 s, asked 10 s (tolerance 1 s)'],
    });
    for (const row of Object.values(rows)) expect(row.status).toBe('succeeded');

    const batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(r.stdout)![1]!;
    const status = await vidbatch(['status', batchId], { cwd: env.dir, env: env1 });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('verified: 1 ok, 3 mismatched');
    expect(status.stdout).toContain('res (line 4): height 720, asked 1080P');
    expect(status.stdout).toContain('dur (line 5): duration 5.0 s, asked 10 s (tolerance 1 s)');
    expect(status.stdout).toMatch(/cut \(line 3\): not a valid MP4: truncated/);
    const results = await vidbatch(['results', batchId], { cwd: env.dir, env: env1 });
    expect(results.code, results.stderr).toBe(0);
    expect(results.stdout).toContain('verified: 1 ok, 3 mismatched');
    expect(results.stdout).toContain('res (line 4): height 720, asked 1080P');
    const table = await readFile(join(manifestOf(r), '..', 'succeeded.csv'), 'utf8');
    expect(table.split('\n')[0]).toMatch(/,file,verification,reusedFrom,arrivedLate$/);
    expect(table).toContain('height 720, asked 1080P');
  });

  it('--verify strict ends a mismatched row as video_mismatch; retry-failed --code video_mismatch pays again for it alone', async () => {
    env = await testEnv();
    const sim = await spawnSimulator(env.dir, [
      ...['--wrong-resolution-words', 'lowres'],
      ...['--moderation-words', 'forbidden'],
    ]);
    await env.startWorker({ baseUrl: sim.baseUrl, apiKey: () => API_KEY });
    await csv(join(env.dir, 's.csv'), [
      ['a', 'a calm lake at dawn', '720P', 5],
      ['b', 'a lowres city at night', '720P', 5],
      ['c', 'a forbidden scene', '720P', 5],
    ]);
    const r = await vidbatch(['run', 's.csv', '--download', 'videos', '--verify', 'strict', ...FAST], {
      cwd: env.dir,
      env: cliEnv(env, sim.baseUrl),
    });
    expect(r.code).toBe(3);
    expect(r.stdout).toContain('1 succeeded, 2 failed of 3');
    const rows = Object.fromEntries((await readManifest(manifestOf(r))).map((row) => [row.rowId, row]));
    expect(rows.a).toMatchObject({ status: 'succeeded', verification: { ok: true } });
    // The mismatched row keeps its job, file and verification; the moderated one has no video to check.
    expect(rows.b).toMatchObject({
      status: 'failed',
      errorCode: 'video_mismatch',
      errorMessage: 'the video differs from the request: height 480, asked 720P',
      verification: { ok: false, height: 480, problems: ['height 480, asked 720P'] },
    });
    expect(rows.b!.jobId).toMatch(/^vid_/);
    expect(rows.b!.file).toMatch(/b\.mp4$/);
    expect(rows.c).toMatchObject({ status: 'failed', errorCode: 'content_moderation' });
    expect(rows.c!.verification).toBeUndefined();
    expect((await sim.stats()).jobsCreated).toBe(3);

    // The gateway behaves now; regenerate the mismatched row deliberately (the moderated one stays).
    await sim.setFaults({ wrongResolutionWords: [] });
    const batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(r.stdout)![1]!;
    const retry = await vidbatch(['retry-failed', batchId, '--code', 'video_mismatch', ...FAST], {
      cwd: env.dir,
      env: cliEnv(env, sim.baseUrl),
    });
    expect(retry.code, retry.stderr).toBe(0);
    expect(retry.stderr).toContain(`1 failed rows of ${batchId}`);
    expect(retry.stdout).toContain('1 succeeded, 0 failed of 1');
    expect((await sim.stats()).jobsCreated).toBe(4);
    const retried = await readManifest(manifestOf(retry));
    expect(retried).toHaveLength(1);
    expect(retried[0]).toMatchObject({
      rowId: 'b',
      status: 'succeeded',
      verification: { ok: true, height: 720 },
    });
    expect(retried[0]!.file).toMatch(/b\.mp4$/);
    expect(retried[0]!.jobId).not.toBe(rows.b!.jobId);
    // The retry kept the original batch's download root and verify mode.
    const retryId =
      /(batch-[0-9a-f]{16}-[0-9a-f]{8}): 1 succeeded/.exec(retry.stdout)?.[1] ??
      retried[0]!.file!.split('/').at(-2)!;
    const options = (await previousInput(env.client, retryId))?.options;
    expect(options).toMatchObject({ verify: 'strict', downloadDir: join(env.dir, 'videos', retryId) });
  });

  it('--verify strict verifies a video it reuses from a --verify flag batch: a mismatch ends video_mismatch, unpaid', async () => {
    env = await testEnv();
    const sim = await spawnSimulator(env.dir, ['--wrong-resolution-words', 'lowres']);
    await env.startWorker({ baseUrl: sim.baseUrl, apiKey: () => API_KEY });
    const tag = randomUUID().slice(0, 8);
    await csv(
      join(env.dir, 'flag.csv'),
      [
        ['ok', 'a calm lake at dawn', '720P', 5],
        ['low', 'a lowres city at night', '720P', 5],
      ],
      tag,
    );
    // The same two requests under other ids, in another order.
    await csv(
      join(env.dir, 'strict.csv'),
      [
        ['city', 'a lowres city at night', '720P', 5],
        ['lake', 'a calm lake at dawn', '720P', 5],
      ],
      tag,
    );
    const settings = cliEnv(env, sim.baseUrl);
    const flagged = await vidbatch(['run', 'flag.csv', '--download', 'videos', ...FAST], {
      cwd: env.dir,
      env: settings,
    });
    expect(flagged.code, flagged.stdout + flagged.stderr).toBe(0);
    expect(flagged.stdout).toContain('2 succeeded, 0 failed of 2');
    const flagRows = Object.fromEntries((await readManifest(manifestOf(flagged))).map((r) => [r.rowId, r]));
    expect(flagRows.low).toMatchObject({ status: 'succeeded', verification: { ok: false } });
    expect((await sim.stats()).jobsCreated).toBe(2);

    const strict = await vidbatch(
      ['run', 'strict.csv', '--download', 'videos', '--verify', 'strict', ...FAST],
      { cwd: env.dir, env: settings },
    );
    expect(strict.code, strict.stdout + strict.stderr).toBe(3);
    expect(strict.stdout).toContain('1 succeeded, 1 failed of 2');
    const rows = Object.fromEntries((await readManifest(manifestOf(strict))).map((r) => [r.rowId, r]));
    const flagBatch = /(batch-[0-9a-f]{16}(?:-[0-9a-f]{8})?)/.exec(flagged.stdout)![1]!;
    expect(rows.lake).toMatchObject({
      status: 'succeeded',
      jobId: flagRows.ok!.jobId,
      verification: { ok: true, height: 720 },
      reusedFrom: { batchId: flagBatch, rowId: 'ok' },
    });
    // Kept as succeeded by the flag batch; this batch's own mode ends it, its job and file kept.
    expect(rows.city).toMatchObject({
      status: 'failed',
      errorCode: 'video_mismatch',
      jobId: flagRows.low!.jobId,
      verification: { ok: false, height: 480, problems: ['height 480, asked 720P'] },
      reusedFrom: { batchId: flagBatch, rowId: 'low' },
    });
    expect(rows.city!.file).toMatch(/city\.mp4$/);
    expect(await readFile(rows.city!.file!)).toEqual(await readFile(flagRows.low!.file!));
    // Nothing was paid for either row.
    expect((await sim.stats()).jobsCreated).toBe(2);
  });
});
