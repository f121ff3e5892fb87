// Spend safety against a hostile gateway (the simulator with Idempotency-Key ignored, answers lost after the
// job was made, long holds, a key disabled mid-run), on the real dev server: each test reads what the gateway
// billed from the simulator's counters and checks it against what vidbatch reported on the rows.
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { resumeUpdate } from '../../src/contract/messages';
import type { PromptResult } from '../../src/contract/prompt';
import { startBatch, type StartBatchOptions } from '../../src/client/batches';
import { readManifest } from '../../src/results/manifest';
import type { Simulator } from '../../src/simulator/server';
import { writeVbenchCsv } from '../../bench/vbench';
import { FAST_POLL, testEnv, waitForProgress, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** Jobs the gateway made per row of `batchId`, from the Idempotency-Keys it saw (all generations). */
function jobsPerRow(sim: Simulator, batchId: string): Map<string, number> {
  const perRow = new Map<string, number>();
  const prefix = `vidbatch:${batchId}:`;
  for (const job of sim.state.jobs.values()) {
    if (!job.idempotencyKey?.startsWith(prefix)) continue;
    const rowId = job.idempotencyKey.slice(prefix.length).replace(/:g\d+$/, '');
    perRow.set(rowId, (perRow.get(rowId) ?? 0) + 1);
  }
  return perRow;
}

/** Each test its own rows: a batch's id is its CSV's content, and the dev server is shared by the run. */
let offset = 300;

async function runBatch(e: TestEnv, rows: number, options: StartBatchOptions) {
  const csv = join(e.dir, `rows-${rows}.csv`);
  await writeVbenchCsv(csv, rows, 'all_dimension', (offset += 50));
  const { handle, batchId } = await startBatch(e.session, csv, {
    concurrency: 8,
    poll: FAST_POLL,
    activityTimeoutMs: 3000,
    submitTimeoutMs: 3000,
    outDir: join(e.dir, 'out'),
    ...options,
  });
  return { handle, batchId };
}

/** After-processing faults on submits only: a job is made, the answer is lost (drop, 502, too slow). */
const LOST_ANSWERS = { drop: 0.12, error502After: 0.12, slow: 0.1, slowMs: 1500, scope: 'submit' as const };

describe('unknown submit outcomes on a gateway that ignores Idempotency-Key', () => {
  it('resend: at most 1 + maxUnknownResends jobs per row, and every row billed twice says so', async () => {
    env = await testEnv({ seed: 7, faults: LOST_ANSWERS });
    expect(env.sim.state.options.idempotency).toBe(false);
    await env.startWorker({ timeoutMs: 2000, submitTimeoutMs: 800 });
    const { handle, batchId } = await runBatch(env, 20, { maxUnknownResends: 1 });
    const result = await handle.result();
    expect(result.total).toBe(20);
    const manifest = await readManifest(result.manifestPath);
    expect(manifest).toHaveLength(20);
    const byRow = new Map(manifest.map((r) => [r.rowId, r] as const));

    const stats = env.sim.stats();
    const perRow = jobsPerRow(env.sim, batchId);
    const flagged = manifest.filter((r) => (r.unknownSubmits ?? 0) > 0);
    const extraJobs = [...perRow.values()].reduce((n, jobs) => n + jobs - 1, 0);
    console.log(
      `resend: ${stats.jobsCreated} jobs for 20 rows; jobs per key ${JSON.stringify(stats.jobsPerIdempotencyKey)}; ` +
        `${stats.ambiguousSubmitsTotal} ambiguous submits; ${flagged.length} rows flagged; ` +
        `${manifest.filter((r) => r.errorCode === 'submit_unknown').length} failed submit_unknown`,
    );
    expect(stats.ambiguousSubmitsTotal).toBeGreaterThan(0); // the faults did hit
    expect(flagged.length).toBeGreaterThan(0);
    expect(Math.max(...perRow.values())).toBeLessThanOrEqual(2);
    for (const [rowId, jobs] of perRow) {
      if (jobs > 1) expect(byRow.get(rowId)?.unknownSubmits, rowId).toBeGreaterThan(0);
    }
    // Each extra job is one of the unknown outcomes the rows report.
    expect(extraJobs).toBeLessThanOrEqual(flagged.reduce((n, r) => n + (r.unknownSubmits ?? 0), 0));
    for (const r of manifest) {
      if (r.status === 'failed') expect(r.errorCode).toBe('submit_unknown');
      if (r.errorCode === 'submit_unknown') expect(r.unknownSubmits).toBe(2);
    }
  }, 120_000);

  it('fail: no row billed more than once, and every unknown outcome fails its row with submit_unknown', async () => {
    env = await testEnv({ seed: 7, faults: LOST_ANSWERS });
    await env.startWorker({ timeoutMs: 2000, submitTimeoutMs: 800 });
    const { handle, batchId } = await runBatch(env, 20, { onUnknownSubmit: 'fail' });
    const result = await handle.result();
    const manifest = await readManifest(result.manifestPath);
    expect(manifest).toHaveLength(20);
    const stats = env.sim.stats();
    const unknown = manifest.filter((r) => r.errorCode === 'submit_unknown');
    console.log(
      `fail: ${stats.jobsCreated} jobs for 20 rows; keys billed more than once ${stats.idempotencyKeysWithMultipleJobs}; ` +
        `${stats.ambiguousSubmitsTotal} ambiguous submits; ${unknown.length} rows failed submit_unknown`,
    );
    expect(stats.ambiguousSubmitsTotal).toBeGreaterThan(0);
    expect(stats.idempotencyKeysWithMultipleJobs).toBe(0);
    expect(Math.max(...jobsPerRow(env.sim, batchId).values())).toBe(1);
    expect(unknown.length).toBeGreaterThan(0);
    for (const r of unknown) expect(r).toMatchObject({ status: 'failed', unknownSubmits: 1 });
    for (const r of manifest.filter((r) => r.status === 'failed')) expect(r.errorCode).toBe('submit_unknown');
    expect(manifest.filter((r) => r.status === 'succeeded')).toHaveLength(20 - unknown.length);
  }, 120_000);
});

describe('waiting is not failing', () => {
  it('a hold longer than the job deadline fails no row; jobs that finished while held succeed', async () => {
    env = await testEnv({ jobSeconds: 1, jobJitterSeconds: 0.3 });
    await env.startWorker();
    const { handle } = await runBatch(env, 10, { concurrency: 10, jobDeadlineMs: 3000 });
    await waitForProgress(handle, () => env!.sim.stats().jobsCreated === 10, 30_000);
    // Every job was submitted, and none can have been polled to completion yet (first check at 300 ms+).
    env.sim.hold(Date.now() + 8000);
    const result = await handle.result();
    const stats = env.sim.stats();
    const manifest = await readManifest(result.manifestPath);
    const failedWhileHeld = manifest.filter((r: PromptResult) => r.status === 'failed');
    console.log(
      `hold: ${stats.held} requests held; ${stats.jobsFinishedWhileHeld} jobs finished while held; ` +
        `${failedWhileHeld.length} rows failed (${failedWhileHeld.map((r) => r.errorCode).join(',')})`,
    );
    expect(stats.held).toBeGreaterThan(0);
    expect(stats.jobsFinishedWhileHeld).toBeGreaterThan(0);
    expect(failedWhileHeld).toEqual([]);
    expect(result).toMatchObject({ total: 10, succeeded: 10, failed: 0 });
    expect(stats.completedJobsNeverDelivered).toBe(0);
  }, 120_000);
});

describe('a refused key stops at once', () => {
  it('sends (almost) nothing with a disabled key, then completes after re-enable and resume', async () => {
    env = await testEnv({ jobSeconds: 1.5, jobJitterSeconds: 0.5 });
    await env.startWorker();
    const { handle } = await runBatch(env, 20, { concurrency: 8 });
    await waitForProgress(handle, (p) => p.started >= 8 && p.inFlight >= 4, 30_000);
    const record = env.sim.state.findKey(env.sim.apiKey)!;
    record.enabled = false;
    await waitForProgress(handle, (p) => p.pausedReason !== null, 30_000);
    // Let every in-flight prompt reach its next call (polls come back every second at most).
    await new Promise((r) => setTimeout(r, 3000));
    const refused = env.sim.stats().requestsWithDisabledKey[record.id] ?? 0;
    const blocked = (await waitForProgress(handle, () => true)).blocked;
    console.log(`disabled key: ${refused} requests sent with it; ${blocked} prompts blocked`);
    expect(refused).toBeGreaterThan(0);
    // One refusal stops the worker; at most the calls already on the wire, which the gateway queue lets go
    // together up to its burst (ceil of its limit: 4 at the start) since no per-worker pacer serialises them.
    expect(refused).toBeLessThanOrEqual(5);
    expect(blocked).toBeGreaterThan(1);

    record.enabled = true;
    const done = handle.result();
    let finished = false;
    void done.finally(() => (finished = true));
    while (!finished) {
      const p = await waitForProgress(handle, () => true);
      if (p.pausedReason) await handle.executeUpdate(resumeUpdate);
      await new Promise((r) => setTimeout(r, 500));
    }
    const result = await done;
    expect(result).toMatchObject({ total: 20, succeeded: 20, failed: 0 });
    expect(env.sim.stats().requestsWithDisabledKey[record.id] ?? 0).toBe(refused);
  }, 120_000);
});
