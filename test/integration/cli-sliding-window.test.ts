// The window slides across continue-as-new, as a user meets it: `vidbatch run` with a window of 20 and a run
// bound of 10 prompts keeps 20 jobs running at the gateway through every continue-as-new (the simulator's
// counts, sampled), and a cancel in the middle ends every prompt, each row once in the manifest, with nothing
// paid twice when the file is run again.
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultPayloadConverter } from '@temporalio/common';
import { writeVbenchCsv } from '../../bench/vbench';
import type { BatchInput } from '../../src/contract/batch';
import { readManifest } from '../../src/results/manifest';
import { background, exitAndOutput, FAST_POLL_FLAGS, runIn, vidbatchIn } from './cli-helpers';
import { cliSettings, testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const WINDOW = ['--concurrency', '20', '--prompts-per-run', '10'];

/** Jobs the gateway has made and not yet finished, every 100 ms while `during` runs. */
async function sampleRunning<T>(e: TestEnv, during: Promise<T>) {
  const samples: { running: number; created: number }[] = [];
  const timer = setInterval(() => {
    const s = e.sim.stats();
    samples.push({ running: s.jobsCreated - s.jobsCompleted - s.jobsFailed, created: s.jobsCreated });
  }, 100);
  try {
    return { result: await during, samples };
  } finally {
    clearInterval(timer);
  }
}

/** Workflow executions matching a visibility query. */
async function count(e: TestEnv, query: string): Promise<number> {
  let n = 0;
  for await (const execution of e.client.workflow.list({ query })) if (execution) n += 1;
  return n;
}

const runsOf = (e: TestEnv, batchId: string) => count(e, `WorkflowId = '${batchId}'`);

/** For each run that continued as new: how many prompts it handed on in flight. */
async function handedOn(e: TestEnv, batchId: string): Promise<number[]> {
  const inFlight: number[] = [];
  for await (const run of e.client.workflow.list({ query: `WorkflowId = '${batchId}'` })) {
    const history = await e.client.workflow.getHandle(batchId, run.runId).fetchHistory();
    const last = history.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes;
    const payload = last?.input?.payloads?.[0];
    if (payload)
      inFlight.push(defaultPayloadConverter.fromPayload<BatchInput>(payload).carry!.window.inFlight.length);
  }
  return inFlight;
}

const batchIdIn = (output: string) => /batch-[0-9a-f]{16}-[0-9a-f]{8}/.exec(output)?.[0] ?? '';

describe('the sliding window', () => {
  it('keeps the window full across continue-as-new', async () => {
    // Jobs long enough for the simulator's request rate to fill a window of 20 between two ends.
    env = await testEnv({ jobSeconds: 10, jobJitterSeconds: 2 });
    await env.startWorker();
    const rows = 60;
    await writeVbenchCsv(join(env.dir, 'w.csv'), rows, 'all_dimension', 300);
    const { result: r, samples } = await sampleRunning(env, runIn(env, 'w.csv', ...WINDOW));
    expect(r.code, exitAndOutput(r)).toBe(0);
    const batchId = batchIdIn(r.stderr + r.stdout);
    expect(env.sim.stats().jobsCreated).toBe(rows);
    const carried = await handedOn(env, batchId);
    // From the window's first fill to the last submit: 20 jobs at the gateway, less those just finished and
    // not yet replaced (the request rate paces the replacements). A run that waited for its prompts before
    // continuing as new would hold 10 at most, and none at each hand-over.
    const full = samples.findIndex((s) => s.running >= 20);
    const last = samples.findIndex((s) => s.created >= rows);
    const steady = samples.slice(full, last).map((s) => s.running);
    const mean = steady.reduce((a, b) => a + b, 0) / steady.length;
    console.log(
      `window 20, 10 prompts per run, ${rows} rows: ${carried.length + 1} runs, prompts in flight at each ` +
        `continue-as-new: ${carried.join(', ')}; jobs running at the gateway from the first fill to the last ` +
        `submit: min ${Math.min(...steady)}, mean ${mean.toFixed(1)}, max ${Math.max(...steady)} (${steady.length} samples)`,
    );
    expect(carried.length).toBeGreaterThanOrEqual(rows / 10 - 1);
    for (const n of carried) expect(n).toBeGreaterThanOrEqual(10);
    expect(Math.max(...samples.map((s) => s.running))).toBe(20);
    expect(steady.length).toBeGreaterThan(10);
    expect(mean).toBeGreaterThan(13);
  }, 240_000);

  it('a cancel in the middle ends every prompt in flight; the re-run pays only for rows never sent', async () => {
    env = await testEnv({ jobSeconds: 10, jobJitterSeconds: 1 });
    await env.startWorker();
    const rows = 50;
    await writeVbenchCsv(join(env.dir, 'c.csv'), rows, 'all_dimension', 400);
    const e = env;
    const run = background(['run', 'c.csv', ...WINDOW, ...FAST_POLL_FLAGS], {
      cwd: e.dir,
      env: cliSettings(e),
    });
    const batchId = (await run.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    // Past the first runs: 30 jobs made means the window slid across continue-as-new with 20 in flight.
    const deadline = Date.now() + 120_000;
    while (e.sim.stats().jobsCreated < 30 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    expect(await runsOf(e, batchId)).toBeGreaterThanOrEqual(2);
    const cancel = await vidbatchIn(e, ['cancel', batchId]);
    expect(cancel.code, exitAndOutput(cancel)).toBe(0);
    const cancelled = await run.done;
    expect(cancelled.stderr).toContain(`${batchId} was cancelled`);

    // Every prompt ended, carried ones included, each row once in the manifest with its job; a cancelled row's
    // prompt may go on watching its job for a late video (VidbatchState 'late'), its row ended all the same.
    const running = () =>
      count(
        e,
        `BatchId = '${batchId}' AND WorkflowType = 'promptWorkflow' AND ExecutionStatus = 'Running' AND VidbatchState != 'late'`,
      );
    const visible = Date.now() + 10_000;
    while ((await running()) > 0 && Date.now() < visible) await new Promise((r) => setTimeout(r, 200));
    expect(await running()).toBe(0);
    const made = e.sim.stats().jobsCreated;
    const manifest = await readManifest(join(e.dir, 'out', batchId, 'manifest.jsonl'));
    const withJob = manifest.filter((m) => m.jobId);
    expect(new Set(withJob.map((m) => m.jobId)).size).toBe(made);
    expect(manifest.filter((m) => m.errorCode === 'cancelled').length).toBeGreaterThanOrEqual(1);
    expect(made).toBeLessThan(rows);

    // The same file again: the cancelled rows' jobs are checked, not bought again; only unsent rows pay.
    const again = await runIn(e, 'c.csv', ...WINDOW);
    expect(again.code, exitAndOutput(again)).toBe(0);
    const stats = e.sim.stats();
    console.log(
      `cancel with a sliding window: ${made} jobs before the cancel (${manifest.length} rows recorded), ` +
        `${stats.jobsCreated} after the re-run of ${rows} rows`,
    );
    expect(stats.jobsCreated).toBe(rows);
    expect(stats.idempotencyKeysWithMultipleJobs).toBe(0);
  }, 300_000);
});
