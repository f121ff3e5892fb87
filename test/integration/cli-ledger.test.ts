// The spend ledger from the command line: the real `vidbatch` (spawned) against this test's
// Temporal server, worker and a simulator that ignores Idempotency-Key. `status` and `results` print every job
// the gateway made for the batch, and the figure is checked against the simulator's own count (GET
// /admin/stats): exact for the jobs whose id reached vidbatch, "up to N more" only for unknown outcomes.
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { batchHandle, getProgress } from '../../src/client/batches';
import type { BatchProgress } from '../../src/contract/progress';
import { readManifest } from '../../src/results/manifest';
import { background, vidbatch, type CliRun } from './cli-helpers';
import { testEnv, type TestEnv, cliSettings } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const FAST = ['--first-poll', '0.5', '--poll-interval', '0.3', '--poll-cap', '1', '--no-adaptive-poll'];

const command = (e: TestEnv, args: string[], extra: Record<string, string> = {}) =>
  vidbatch(args, { cwd: e.dir, env: { ...cliSettings(e), ...extra } });

/** n prompts unique to this test (a batch id is the CSV's hash, and tests share one Temporal server). */
async function uniqueCsv(e: TestEnv, n: number, extraColumns = ''): Promise<string> {
  const tag = randomUUID().slice(0, 8);
  const lines = [`id,prompt${extraColumns ? `,${extraColumns.split('=')[0]}` : ''}`];
  for (let i = 1; i <= n; i++)
    lines.push(`r${i},a harbour at night ${tag} ${i}${extraColumns ? `,${extraColumns.split('=')[1]}` : ''}`);
  await writeFile(join(e.dir, 'l.csv'), lines.join('\n') + '\n');
  return 'l.csv';
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The simulator's own counters, over HTTP as any client would read them. */
async function adminStats(e: TestEnv): Promise<{ jobsCreated: number; ambiguousSubmitsTotal: number }> {
  const res = await fetch(`${e.sim.origin}/admin/stats`);
  return (await res.json()) as { jobsCreated: number; ambiguousSubmitsTotal: number };
}

interface LedgerLine {
  made: number;
  rows: number;
  kept: number;
  failed: number;
  abandoned: number;
  pending: number;
  unknown: number;
  cost?: string;
}

/** The ledger line a command printed, in figures. */
function ledgerIn(r: CliRun): LedgerLine {
  const text = r.stdout;
  const m = /jobs made: ([\d,]+) for ([\d,]+) rows? \(([^)]*)\)(?:, estimated cost ([\d.,]+))?/.exec(text);
  if (!m) throw new Error(`no ledger line in:\n${text}\n${r.stderr}`);
  const n = (s: string | undefined) => Number((s ?? '0').replace(/,/g, ''));
  const part = (re: RegExp) => n(re.exec(m[3]!)?.[1]);
  return {
    made: n(m[1]),
    rows: n(m[2]),
    kept: part(/([\d,]+) kept/),
    failed: part(/([\d,]+) failed at the gateway/),
    abandoned: part(/([\d,]+) abandoned/),
    pending: part(/([\d,]+) pending/),
    unknown: part(/up to ([\d,]+) more unknown/),
    ...(m[4] ? { cost: m[4] } : {}),
  };
}

describe('spend ledger (spawned vidbatch)', () => {
  it('counts a cancelled, a deadline-exceeded and an unknown-outcome row; jobs made match the simulator', async () => {
    // Seed 4: the 2nd submit is answered 504 after the job was made (an unknown outcome; the row resends).
    env = await testEnv({
      jobSeconds: 1,
      jobJitterSeconds: 0.3,
      seed: 4,
      faults: { scope: 'submit', error504After: 0.2 },
    });
    await env.startWorker();
    const csv = await uniqueCsv(env, 30);
    // The deadline is long enough that a slow row is still in flight after a few spawned `status` calls on a
    // loaded machine (with 4 s, every in-flight row could end deadline_exceeded before the cancel reached it).
    const p = background(['run', csv, '--concurrency', '2', '--job-deadline', '20', ...FAST], {
      cwd: env.dir,
      env: cliSettings(env),
    });
    const batchId = (await p.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    const handle = batchHandle(env.client, batchId);
    const progressed = (test: (p: BatchProgress) => boolean) => async () => {
      const progress = await getProgress(handle);
      return !!progress && test(progress);
    };
    await until(
      'a row with an unknown outcome',
      progressed((p) => p.unknownSubmitRows >= 1 && p.succeeded >= 2),
    );
    env.sim.setFaults({ error504After: 0 });
    // Jobs of 25 s outlast --job-deadline 20: the rows that submit now end deadline_exceeded (their jobs still
    // finish, and are paid).
    env.sim.setOptions({ jobSeconds: 25, jobJitterSeconds: 0 });
    await until(
      'a deadline-exceeded row',
      progressed((p) => p.failed >= 1),
    );
    // From now on every job takes 10 minutes: the rows that submit next are in flight when the batch is cancelled.
    const slowFrom = Date.now();
    env.sim.setOptions({ jobSeconds: 600, jobJitterSeconds: 0 });
    await until(
      'both slots on a slow job',
      () => [...env!.sim.state.jobs.values()].filter((j) => j.createdAt >= slowFrom).length >= 2,
    );
    // While the batch runs, `status` counts the jobs in flight as pending (the journal has them already).
    let during: LedgerLine | undefined;
    await until('status to show the jobs in flight', async () => {
      during = ledgerIn(await command(env!, ['status', batchId]));
      const now = await adminStats(env!);
      return during.pending >= 2 && during.made === now.jobsCreated - now.ambiguousSubmitsTotal;
    });
    console.log(`ledger while running: ${JSON.stringify(during)}`);
    expect((await command(env, ['cancel', batchId])).code).toBe(0);
    const cancelled = await p.done;
    expect(cancelled.stderr).toContain(`${batchId} was cancelled`);

    const manifest = await readManifest(join(env.dir, 'out', batchId, 'manifest.jsonl'));
    const withCode = (code: string) => manifest.filter((r) => r.errorCode === code && r.jobId).length;
    const stats = await adminStats(env);
    const status = await command(env, ['status', batchId]);
    const results = await command(env, ['results', batchId]);
    const fromStatus = ledgerIn(status);
    console.log(
      `ledger: ${/jobs made: .*/.exec(status.stdout)?.[0]}; simulator: ${stats.jobsCreated} jobs created, ` +
        `${stats.ambiguousSubmitsTotal} answers lost after the job was made`,
    );
    expect(ledgerIn(results)).toEqual(fromStatus);
    expect(results.code).toBe(0);
    expect(fromStatus.rows).toBe(30);
    // Each category, as the manifest shows it.
    expect(withCode('cancelled')).toBeGreaterThanOrEqual(1);
    expect(withCode('deadline_exceeded')).toBeGreaterThanOrEqual(1);
    expect(fromStatus.kept).toBe(manifest.filter((r) => r.status === 'succeeded').length);
    expect(fromStatus.abandoned).toBe(withCode('cancelled') + withCode('deadline_exceeded'));
    expect(fromStatus.failed).toBe(0);
    expect(fromStatus.pending).toBe(0);
    expect(fromStatus.unknown).toBe(manifest.reduce((n, r) => n + (r.unknownSubmits ?? 0), 0));
    expect(fromStatus.unknown).toBeGreaterThanOrEqual(1);
    // The bound holds: every job whose id reached vidbatch is counted, the unknowns cover the rest.
    expect(fromStatus.made).toBeLessThanOrEqual(stats.jobsCreated);
    expect(stats.jobsCreated).toBeLessThanOrEqual(fromStatus.made + fromStatus.unknown);
    // Here every unknown outcome was a 504 after the job was made: the simulator's count is exactly both.
    expect(fromStatus.made).toBe(stats.jobsCreated - stats.ambiguousSubmitsTotal);
    expect(fromStatus.made + fromStatus.unknown).toBe(stats.jobsCreated);

    // Running the CSV again continues the batch: known jobs are checked (the 25 s ones have completed and are
    // kept, the slow ones run out their deadline again), the other rows get new jobs. The ledger still matches.
    env.sim.setOptions({ jobSeconds: 1, jobJitterSeconds: 0.3 });
    const again = await command(env, ['run', csv, '--concurrency', '6', ...FAST]);
    expect(again.stdout).toMatch(/\d+ succeeded, \d+ failed of 30/);
    const after = await adminStats(env);
    const rerun = ledgerIn(again);
    const finalRows = await readManifest(join(env.dir, 'out', batchId, 'manifest.jsonl'));
    console.log(
      `after the re-run: ${/jobs made: .*/.exec(again.stdout)?.[0]}; simulator: ${after.jobsCreated} jobs created`,
    );
    expect(ledgerIn(await command(env, ['status', batchId]))).toEqual(rerun);
    expect(rerun.kept).toBe(finalRows.filter((r) => r.status === 'succeeded').length);
    expect(rerun.pending).toBe(0);
    expect(rerun.made).toBeGreaterThan(fromStatus.made);
    expect(rerun.made).toBeLessThanOrEqual(after.jobsCreated);
    expect(after.jobsCreated).toBeLessThanOrEqual(rerun.made + rerun.unknown);
    expect(rerun.made).toBe(after.jobsCreated - after.ambiguousSubmitsTotal);
  }, 300_000);

  it('plan --price estimates before a run; run, status and results show the ledger with its cost', async () => {
    env = await testEnv({ jobSeconds: 0.5, jobJitterSeconds: 0.2 });
    // duration 8 s per row at 0.25 per second: 2.00 a job.
    const csv = await uniqueCsv(env, 4, 'duration=8');
    const plan = await command(env, ['plan', csv, '--price', 'modelfamily-1.0-r2v=0.25']);
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout)).toMatchObject({
      rows: 4,
      estimate: { cost: 8, seconds: 32, unpricedRows: 0 },
    });
    expect(plan.stderr).toContain('estimated cost: 8.00 for 4 rows (32 s of video, one job per row)');
    const dry = await command(env, ['run', csv, '--dry-run', '--price', 'modelfamily-1.0-r2v@720P=0.5']);
    expect(JSON.parse(dry.stdout)).toMatchObject({ estimate: { cost: 16, seconds: 32 } });
    expect(env.sim.stats().jobsCreated).toBe(0);

    await env.startWorker();
    const run = await command(env, ['run', csv, '--price', 'modelfamily-1.0-r2v=0.25', ...FAST]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('jobs made: 4 for 4 rows (4 kept), estimated cost 8.00');
    const batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(run.stdout)![1]!;
    await writeFile(
      join(env.dir, 'prices.json'),
      JSON.stringify({ currency: 'EUR', prices: [{ model: '*', perVideo: 1.5 }] }),
    );
    const status = await command(env, ['status', batchId], { VIDBATCH_PRICES: 'prices.json' });
    expect(status.stdout).toContain('jobs made: 4 for 4 rows (4 kept), estimated cost 6.00 EUR');
    const results = await command(env, ['results', batchId, '--prices', 'prices.json']);
    expect(results.stdout).toContain('jobs made: 4 for 4 rows (4 kept), estimated cost 6.00 EUR');
    expect(ledgerIn(results).made).toBe((await adminStats(env)).jobsCreated);
  });

  it('a bad --price or prices file is refused with exit 2, naming the flag or the file, line and column', async () => {
    env = await testEnv();
    const csv = await uniqueCsv(env, 2);
    const flag = await command(env, ['plan', csv, '--price', 'modelfamily-1.0-r2v=cheap']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain(
      "option '--price <model=amount>' argument 'modelfamily-1.0-r2v=cheap' is invalid",
    );
    expect(flag.stderr).toContain('amount must be a number >= 0');
    await writeFile(
      join(env.dir, 'prices.csv'),
      'model,resolution,per_second\nmodelfamily-1.0-r2v,720P,-1\n',
    );
    const file = await command(env, ['status', 'batch-0000000000000000', '--prices', 'prices.csv']);
    expect(file.code).toBe(2);
    expect(file.stderr).toContain('prices file prices.csv, line 2, column per_second: must be a number >= 0');
    const env2 = await command(env, ['plan', csv], { VIDBATCH_PRICES: 'missing.json' });
    expect(env2.code).toBe(2);
    expect(env2.stderr).toContain('prices file missing.json: cannot read it');
    expect(env.sim.stats().jobsCreated).toBe(0);
  });
});
