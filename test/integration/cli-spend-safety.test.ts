// Spend safety from the command line: the real `vidbatch` (spawned) against this test's Temporal
// server, worker and simulator, the simulator as hostile as the spec allows (Idempotency-Key IGNORED, answers
// lost after the job was made, keys disabled mid-run, long Retry-After holds). Every figure comes from the
// simulator's own counters and the manifest files; each is printed so a run shows what it measured.
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadGatewaySettings } from '../../src/config';
import type { PromptResult } from '../../src/contract/prompt';
import { readJsonl } from '../../src/results/jsonl';
import { finalStates, readManifest } from '../../src/results/manifest';
import { background, vidbatch, type CliRun } from './cli-helpers';
import { testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const FAST = ['--first-poll', '0.5', '--poll-interval', '0.3', '--poll-cap', '1', '--no-adaptive-poll'];

function cli(e: TestEnv, extra: Record<string, string> = {}): Record<string, string> {
  return {
    TEMPORAL_ADDRESS: e.address,
    VIDBATCH_TASK_QUEUE: e.taskQueue,
    GATEWAY_BASE_URL: e.sim.baseUrl,
    GATEWAY_API_KEY: e.sim.apiKey,
    ...extra,
  };
}

const run = (e: TestEnv, args: string[]) => vidbatch(['run', ...args, ...FAST], { cwd: e.dir, env: cli(e) });
const runInBackground = (e: TestEnv, args: string[]) =>
  background(['run', ...args, ...FAST], { cwd: e.dir, env: cli(e) });

/** The manifest path the summary line names. */
function manifestOf(r: CliRun | string): string {
  const text = typeof r === 'string' ? r : r.stdout;
  const path = /Manifest: (\S+manifest\.jsonl)/.exec(text)?.[1];
  if (!path) throw new Error(`no manifest in output:\n${typeof r === 'string' ? r : r.stdout + r.stderr}`);
  return path;
}

/** The count the summary reports for rows that may have been billed more than once (0 when not reported). */
function reportedUnknownRows(output: string): number {
  return Number(/(\d+) rows? had a submit with an unknown outcome/.exec(output)?.[1] ?? 0);
}

/** The batch id of the "Started batch ..." / "Attached to batch ..." line. */
async function batchIdOf(p: ReturnType<typeof background>): Promise<string> {
  return (await p.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * n prompts unique to this test: a batch id is the CSV's hash, and the tests share one Temporal server, so the
 * same content would attach to another test's batch.
 */
async function uniqueCsv(path: string, n: number): Promise<void> {
  const tag = randomUUID().slice(0, 8);
  const lines = ['id,prompt'];
  for (let i = 1; i <= n; i++) lines.push(`r${i},a calm lake at dawn ${tag} ${i}`);
  await writeFile(path, lines.join('\n') + '\n');
}

/** `vidbatch status <batch>`, spawned. */
const status = (e: TestEnv, batchId: string) => vidbatch(['status', batchId], { cwd: e.dir, env: cli(e) });

describe('spend safety from the command line (Idempotency-Key ignored)', () => {
  it('--on-unknown-submit fail: no key billed twice, unknown rows fail submit_unknown (exit 3); retry-failed --code submit_unknown re-sends them', async () => {
    env = await testEnv({
      jobSeconds: 1,
      jobJitterSeconds: 0.3,
      seed: 7,
      // Lost answers after the job was made: a dropped connection, a proxy's 502, an answer later than the
      // submit attempt (--submit-timeout 3 keeps the worker's 120 s HTTP wait inside the 3 s attempt).
      faults: { scope: 'submit', drop: 0.15, error502After: 0.15, slow: 0.1, slowMs: 6000 },
    });
    expect(env.sim.state.options.idempotency).toBe(false);
    // The worker's own submit wait is the real default (120 s): only --submit-timeout can cut a slow answer.
    await env.startWorker({ submitTimeoutMs: 120_000 });
    await uniqueCsv(join(env.dir, 'u.csv'), 16);
    const r = await run(env, [
      'u.csv',
      '--concurrency',
      '6',
      '--on-unknown-submit',
      'fail',
      '--submit-timeout',
      '3',
    ]);
    const stats = env.sim.stats();
    const manifest = await readManifest(manifestOf(r));
    const unknown = manifest.filter((row) => row.errorCode === 'submit_unknown');
    console.log(
      `fail policy: ${stats.jobsCreated} jobs for 16 rows, ${stats.ambiguousSubmitsTotal} ambiguous submits (${JSON.stringify(stats.ambiguousSubmits)}), ${unknown.length} rows failed submit_unknown, keys billed twice: ${stats.idempotencyKeysWithMultipleJobs}`,
    );
    expect(stats.ambiguousSubmits.slow ?? 0).toBeGreaterThan(0); // --submit-timeout reached the worker
    expect(unknown.length).toBeGreaterThan(0);
    expect(stats.idempotencyKeysWithMultipleJobs).toBe(0);
    expect(stats.jobsCreated).toBe(16); // one job per row, the lost ones included
    expect(unknown.length).toBe(stats.ambiguousSubmitsTotal);
    for (const row of unknown) expect(row.unknownSubmits).toBe(1);
    expect(r.code).toBe(3);
    expect(r.stdout).toContain(`${16 - unknown.length} succeeded, ${unknown.length} failed of 16`);
    expect(reportedUnknownRows(r.stdout)).toBe(unknown.length);

    // Deliberately: re-send those rows (the gateway behaves now).
    env.sim.setFaults({ drop: 0, error502After: 0, slow: 0 });
    const batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8}):/.exec(r.stdout)![1]!;
    const retry = await vidbatch(['retry-failed', batchId, '--code', 'submit_unknown', ...FAST], {
      cwd: env.dir,
      env: cli(env),
    });
    const after = env.sim.stats();
    console.log(
      `retry-failed --code submit_unknown: ${retry.code}, ${after.jobsCreated - stats.jobsCreated} new jobs for ${unknown.length} rows`,
    );
    expect(retry.code, retry.stderr).toBe(0);
    expect(retry.stderr).toContain(`${unknown.length} failed rows of ${batchId}`);
    expect(retry.stdout).toContain(`${unknown.length} succeeded, 0 failed of ${unknown.length}`);
    expect(after.jobsCreated - stats.jobsCreated).toBe(unknown.length);
    const retried = await readManifest(manifestOf(retry));
    expect(retried.map((row) => row.rowId).sort()).toEqual(unknown.map((row) => row.rowId).sort());
  });

  it('resend with --max-unknown-resends 1: at most 2 jobs per key, only for rows reporting unknownSubmits, and the summary counts them', async () => {
    env = await testEnv({
      jobSeconds: 1,
      jobJitterSeconds: 0.3,
      seed: 11,
      faults: { scope: 'submit', drop: 0.25, error502After: 0.1 },
    });
    await env.startWorker();
    await uniqueCsv(join(env.dir, 'r.csv'), 16);
    const r = await run(env, ['r.csv', '--concurrency', '6', '--max-unknown-resends', '1']);
    const stats = env.sim.stats();
    const manifest = await readManifest(manifestOf(r));
    const unknownRows = manifest.filter((row) => (row.unknownSubmits ?? 0) > 0);
    const billedTwice = Object.entries(stats.idempotencyKeysBilledMoreThanOnce);
    const failed = manifest.filter((row) => row.status === 'failed');
    console.log(
      `resend policy: ${stats.jobsCreated} jobs for 16 rows (${(stats.jobsCreated / 16).toFixed(2)} per row), jobs per key ${JSON.stringify(stats.jobsPerIdempotencyKey)}, ${unknownRows.length} rows with unknown outcomes, ${failed.length} failed`,
    );
    expect(stats.ambiguousSubmitsTotal).toBeGreaterThan(0);
    expect(unknownRows.length).toBeGreaterThan(0);
    expect(Math.max(...Object.keys(stats.jobsPerIdempotencyKey).map(Number))).toBeLessThanOrEqual(2);
    const unknownIds = new Set(unknownRows.map((row) => row.rowId));
    for (const [key, jobs] of billedTwice) {
      expect(jobs).toBe(2);
      const rowId = key.split(':')[2]!; // vidbatch:<batch>:<row>
      expect(unknownIds.has(rowId), `${key} billed twice but its row reports no unknown submit`).toBe(true);
    }
    // Never more extra jobs than the unknown outcomes reported.
    const reported = manifest.reduce((n, row) => n + (row.unknownSubmits ?? 0), 0);
    expect(stats.jobsCreated - 16).toBeLessThanOrEqual(reported);
    expect(failed.every((row) => row.errorCode === 'submit_unknown')).toBe(true);
    expect(r.code).toBe(failed.length > 0 ? 3 : 0);
    expect(reportedUnknownRows(r.stdout)).toBe(unknownRows.length);
  });

  it('run, cancel from a second process, run again: every row paid once, all succeeded, skipped rows reported', async () => {
    // Jobs of 3 s: a spawned `vidbatch cancel` takes seconds on a busy machine, and must land mid-batch.
    env = await testEnv({ jobSeconds: 3, jobJitterSeconds: 0.5 });
    await env.startWorker();
    await uniqueCsv(join(env.dir, 'c.csv'), 20);
    const first = runInBackground(env, ['c.csv', '--concurrency', '4']);
    const batchId = await batchIdOf(first);
    await until('some rows done and some in flight', () => env!.sim.stats().jobsCompleted >= 4);
    const cancelAsked = Date.now();
    const cancel = await vidbatch(['cancel', batchId], { cwd: env.dir, env: cli(env) });
    expect(cancel.code, cancel.stderr).toBe(0);
    const cancelled = await first.done;
    expect(cancelled.code).toBe(3);
    expect(cancelled.stderr).toContain(`${batchId} was cancelled`);
    const cancelMs = Date.now() - cancelAsked;
    // How many jobs exist by then depends on how long the cancel took; the checks below hold for any.
    const jobsBefore = env.sim.stats().jobsCreated;

    const rerunAt = new Date().toISOString();
    const again = await run(env, ['c.csv', '--concurrency', '4']);
    const stats = env.sim.stats();
    const path = manifestOf(again);
    const manifest = await readManifest(path);
    const skipped = Number(/(\d+) rows? (?:was|were) skipped/.exec(again.stdout)?.[1] ?? 0);
    // The manifest only grows: what the cancelled run had recorded is what it holds from before the re-run.
    const lines = await readJsonl<PromptResult>(path);
    const before = finalStates(lines.filter((line) => line.finishedAt < rerunAt));
    const doneBefore = before.filter((row) => row.status === 'succeeded').map((row) => row.rowId);
    console.log(
      `cancel + re-run: cancel took ${cancelMs} ms, ${jobsBefore} jobs before the re-run, ${stats.jobsCreated} in all for 20 rows, ${doneBefore.length} rows succeeded before the cancel, ${skipped} rows skipped, keys billed twice: ${stats.idempotencyKeysWithMultipleJobs}`,
    );
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('20 succeeded, 0 failed of 20');
    // Every row paid once: the re-run made a job only for rows that had none, and none twice.
    expect(stats.jobsCreated).toBe(20);
    expect(stats.bodiesWithMultipleJobs).toBe(0);
    expect(stats.idempotencyKeysWithMultipleJobs).toBe(0);
    expect(manifest).toHaveLength(20);
    expect(manifest.every((row) => row.status === 'succeeded' && row.url)).toBe(true);
    // How many rows the cancel caught finished depends on timing; what the user is told must not. The
    // rows the cancelled run finished are exactly those the re-run reports skipped, and are not done again
    // (their record is still the one from before the cancel).
    expect(skipped).toBe(doneBefore.length);
    const finishedAt = new Map(manifest.map((row) => [row.rowId, row.finishedAt]));
    for (const row of before.filter((r) => r.status === 'succeeded'))
      expect(finishedAt.get(row.rowId), `row ${row.rowId} done again`).toBe(row.finishedAt);
    // The cancel left rows to the re-run; and a job starts only in a free slot of 4, so all but 4 of the rows
    // with a job had finished, and each finished row is in the manifest (as the cancel message says).
    expect(doneBefore.length).toBeLessThan(20);
    expect(doneBefore.length).toBeGreaterThanOrEqual(jobsBefore - 4);
  });

  it('a key disabled mid-run pauses the batch (status says why); a new key in GATEWAY_API_KEY_FILE and `resume` finish it', async () => {
    env = await testEnv({ jobSeconds: 1, jobJitterSeconds: 0.3 });
    const keyFile = join(env.dir, 'gateway.key');
    await writeFile(keyFile, `${env.sim.apiKey}\n`);
    // The worker reads its key as a deployed one does: from GATEWAY_API_KEY_FILE, re-read when it changes.
    await env.startWorker(
      loadGatewaySettings({ GATEWAY_BASE_URL: env.sim.baseUrl, GATEWAY_API_KEY_FILE: keyFile }),
    );
    await uniqueCsv(join(env.dir, 'k.csv'), 16);
    const window = 4;
    const p = runInBackground(env, ['k.csv', '--concurrency', String(window)]);
    const batchId = await batchIdOf(p);
    await until('4 jobs done', () => env!.sim.stats().jobsCompleted >= 4);
    const old = env.sim.state.findKey(env.sim.apiKey)!;
    const disabled = await fetch(`${env.sim.origin}/admin/keys/${old.id}/disable`, { method: 'POST' });
    expect(disabled.status).toBe(200);

    let paused: CliRun | undefined;
    await until('status shows the pause', async () => {
      paused = await status(env!, batchId);
      return /PAUSED: the gateway refused the API key/.test(paused.stdout);
    });
    await new Promise((r) => setTimeout(r, 3000)); // paused means paused: nothing more goes out meanwhile
    const refused = env.sim.stats().requestsWithDisabledKey[old.id] ?? 0;
    console.log(`key disabled: ${refused} requests with the disabled key (window ${window})`);
    expect(refused).toBeGreaterThan(0);
    expect(refused).toBeLessThanOrEqual(window);

    const created = (await (
      await fetch(`${env.sim.origin}/admin/keys`, { method: 'POST', body: '{"description":"rotated"}' })
    ).json()) as { key: string };
    await writeFile(keyFile, `${created.key}\n`);
    const resumed = await vidbatch(['resume', batchId], { cwd: env.dir, env: cli(env) });
    expect(resumed.code, resumed.stderr).toBe(0);
    const r = await p.done;
    const stats = env.sim.stats();
    console.log(
      `after rotation: exit ${r.code}, ${stats.jobsCreated} jobs for 16 rows, ${stats.requestsWithDisabledKey[old.id] ?? 0} requests with the disabled key in all`,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('16 succeeded, 0 failed of 16');
    expect(stats.requestsWithDisabledKey[old.id] ?? 0).toBe(refused);
    expect(stats.jobsCreated).toBe(16);
  });

  it('a Retry-After hold longer than --job-deadline fails no row; status says the gateway asked to wait', async () => {
    env = await testEnv({ jobSeconds: 1, jobJitterSeconds: 0.3 });
    await env.startWorker();
    await uniqueCsv(join(env.dir, 'h.csv'), 16);
    // Every row submitted before the hold: only status checks meet it, which the batch itself is not told of.
    const p = runInBackground(env, ['h.csv', '--concurrency', '16', '--job-deadline', '3']);
    const batchId = await batchIdOf(p);
    await until('every row submitted', () => env!.sim.stats().jobsCreated >= 16);
    const holdMs = 15_000;
    env.sim.hold(Date.now() + holdMs);

    let held: CliRun | undefined;
    await until(
      'status shows the hold',
      async () => {
        held = await status(env!, batchId);
        return /gateway asked to wait until \d\d:\d\d/.test(held.stdout);
      },
      holdMs,
    );
    const r = await p.done;
    const stats = env.sim.stats();
    const manifest = await readManifest(manifestOf(r));
    const deadlineFailures = manifest.filter((row) => row.errorCode === 'deadline_exceeded').length;
    console.log(
      `hold ${holdMs / 1000} s vs --job-deadline 3: ${stats.jobsFinishedWhileHeld} jobs finished while held, ${deadlineFailures} rows failed deadline_exceeded, ${stats.held} requests held; status said: ${/HOLD: [^·\n]*/.exec(held!.stdout)?.[0]}; run's progress line said: ${/HOLD: [^·\n]*/.exec(r.stderr)?.[0] ?? '(no line printed during the hold)'}`,
    );
    expect(stats.held).toBeGreaterThan(0);
    expect(stats.jobsFinishedWhileHeld).toBeGreaterThan(0);
    expect(deadlineFailures).toBe(0);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('16 succeeded, 0 failed of 16');
    expect(stats.jobsCreated).toBe(16);
  });
});
