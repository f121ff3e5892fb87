// Over 400 lines: one night's failures in a row, sharing the spawned-CLI set-up.
// Unattended to the end, from the command line: the real `vidbatch` (spawned) against this test's
// Temporal server, worker and a hostile simulator (Idempotency-Key ignored). Each test is one night's failure:
// bad answers for one job, a refused key while rows finish, a gateway that takes the money and answers 504,
// a gateway that cannot be reached, and a re-run after unknown outcomes. Figures are printed.
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { previousInput } from '../../src/client/rerun';
import { readManifest } from '../../src/results/manifest';
import { background, vidbatch, type CliRun } from './cli-helpers';
import { testEnv, type TestEnv, cliSettings } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const FAST = ['--first-poll', '0.5', '--poll-interval', '0.5', '--poll-cap', '1', '--no-adaptive-poll'];

const run = (e: TestEnv, args: string[]) =>
  vidbatch(['run', ...args, ...FAST], { cwd: e.dir, env: cliSettings(e) });
const runInBackground = (e: TestEnv, args: string[]) =>
  background(['run', ...args, ...FAST], { cwd: e.dir, env: cliSettings(e) });
const command = (e: TestEnv, args: string[]) => vidbatch(args, { cwd: e.dir, env: cliSettings(e) });

/** n prompts unique to this test (the batch id is the CSV's hash, and tests share one Temporal server). */
async function uniqueCsv(e: TestEnv, n: number): Promise<string> {
  const tag = randomUUID().slice(0, 8);
  const lines = ['id,prompt'];
  for (let i = 1; i <= n; i++) lines.push(`r${i},a lighthouse in fog ${tag} ${i}`);
  await writeFile(join(e.dir, 'u.csv'), lines.join('\n') + '\n');
  return 'u.csv';
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const batchIdIn = (text: string) => /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(text)?.[1];

/** The batch's manifest in the test worker's output root, or [] before the first line. */
async function manifestRows(e: TestEnv, batchId: string) {
  return readManifest(join(e.dir, 'out', batchId, 'manifest.jsonl')).catch(() => []);
}

/** Simulator jobs per prompt row id ("... <tag> 7" -> r7). */
function jobsByRow(e: TestEnv): Map<string, string[]> {
  const byRow = new Map<string, string[]>();
  for (const job of e.sim.state.jobs.values()) {
    const row = `r${/ (\d+)$/.exec(job.prompt)?.[1]}`;
    byRow.set(row, [...(byRow.get(row) ?? []), job.id]);
  }
  return byRow;
}

function output(r: CliRun): string {
  return r.stdout + r.stderr;
}

describe('unattended to the end (spawned vidbatch, hostile simulator)', () => {
  it('a job answering completed without a URL, or 500 for its id, ends its row; the batch ends', async () => {
    env = await testEnv({
      jobSeconds: 1,
      jobJitterSeconds: 0.3,
      seed: 6, // 2 jobs without a URL, 2 answering 500 (the dice are rolled once per job, in order)
      faults: { jobNoUrl: 0.15, jobError5xx: 0.15 },
    });
    await env.startWorker();
    const csv = await uniqueCsv(env, 20);
    const started = Date.now();
    const r = await run(env, [csv, '--job-deadline', '8', '--concurrency', '20']);
    const seconds = (Date.now() - started) / 1000;
    const bad = env.sim.stats().jobsWithBadAnswers;
    const noUrl = new Set(bad.no_url ?? []);
    const error5xx = new Set(bad.error5xx ?? []);
    const manifest = await manifestRows(env, batchIdIn(r.stdout)!);
    const codes: Record<string, number> = {};
    for (const row of manifest)
      codes[row.errorCode ?? row.status] = (codes[row.errorCode ?? row.status] ?? 0) + 1;
    console.log(
      `bad jobs: ended in ${seconds.toFixed(1)} s, exit ${r.code}, rows ${JSON.stringify(codes)}, ` +
        `jobs ${env.sim.stats().jobsCreated} for 20 rows (${noUrl.size} without URL, ${error5xx.size} answering 500)`,
    );
    expect(noUrl.size).toBeGreaterThan(0);
    expect(error5xx.size).toBeGreaterThan(0);
    expect(r.code).toBe(3); // some rows failed
    expect(manifest).toHaveLength(20);
    for (const row of manifest) {
      if (noUrl.has(row.jobId!)) {
        expect(row).toMatchObject({ status: 'failed', errorCode: 'no_video_url' });
      } else if (error5xx.has(row.jobId!)) {
        expect(row).toMatchObject({ status: 'failed', errorCode: 'deadline_exceeded' });
        expect(row.errorMessage).toMatch(/last error: .*500/);
      } else {
        expect(row.status).toBe('succeeded');
      }
    }
    expect(env.sim.stats().jobsCreated).toBe(20);
    expect(r.stdout).toContain(
      `${20 - noUrl.size - error5xx.size} succeeded, ${noUrl.size + error5xx.size} failed of 20`,
    );
  });

  it('rows finished before a key was disabled reach manifest.jsonl while the batch is paused', async () => {
    env = await testEnv({ jobSeconds: 3, jobJitterSeconds: 2.5, seed: 3 });
    await env.startWorker();
    const csv = await uniqueCsv(env, 12);
    const p = runInBackground(env, [csv, '--concurrency', '12']);
    const batchId = (await p.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    const delivered = () =>
      [...env!.sim.state.jobs.values()].filter((j) => j.resultDelivered).map((j) => j.id);
    await until('4 finished rows', () => delivered().length >= 4);
    const key = [...env.sim.state.keys.values()][0]!;
    key.enabled = false;
    await until('the batch to pause', async () =>
      /refused the API key/.test(output(await command(env!, ['status', batchId]))),
    );
    const finished = delivered(); // nothing is delivered with the key disabled
    const pausedAt = Date.now();
    await until(
      'every delivered row in the manifest',
      async () => {
        const recorded = new Set((await manifestRows(env!, batchId)).map((row) => row.jobId));
        return finished.every((id) => recorded.has(id));
      },
      25_000,
    );
    console.log(
      `paused batch: ${finished.length} delivered rows in manifest.jsonl ${((Date.now() - pausedAt) / 1000).toFixed(1)} s after the pause was seen`,
    );
    key.enabled = true;
    const resumed = await command(env, ['resume', batchId]);
    expect(resumed.code).toBe(0);
    const r = await p.done;
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('12 succeeded, 0 failed of 12');
    expect(env.sim.stats().jobsCreated).toBe(12);
  });

  it('the breaker: submits answered 504 after the job was made pause the batch; resume goes on', async () => {
    env = await testEnv({ jobSeconds: 1, seed: 5, faults: { scope: 'submit', error504After: 1 } });
    await env.startWorker();
    const csv = await uniqueCsv(env, 20);
    const p = runInBackground(env, [csv, '--concurrency', '2']);
    const batchId = (await p.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    await until('the breaker', async () =>
      /5 submits in a row had an unknown outcome: paused so as not to pay for jobs vidbatch cannot see/.test(
        output(await command(env!, ['status', batchId])),
      ),
    );
    const tripped = env.sim.stats().jobsCreated;
    await new Promise((r) => setTimeout(r, 4000));
    const later = env.sim.stats().jobsCreated;
    console.log(`breaker: ${tripped} jobs made before it tripped, ${later} four seconds later`);
    expect(tripped).toBeLessThanOrEqual(5 + 2); // the count, plus the window's other submit
    expect(later).toBe(tripped); // paused: nothing more is sent
    env.sim.setFaults({ error504After: 0 });
    expect((await command(env, ['resume', batchId])).code).toBe(0);
    const r = await p.done;
    const manifest = await manifestRows(env, batchId);
    const unknownRows = manifest.filter((row) => (row.unknownSubmits ?? 0) > 0).length;
    console.log(
      `breaker: after resume ${env.sim.stats().jobsCreated} jobs for 20 rows, ${unknownRows} rows flagged`,
    );
    // Rows whose resend (--max-unknown-resends 1) was unknown again end submit_unknown; every other row succeeds.
    const failed = manifest.filter((row) => row.status === 'failed');
    for (const row of failed) expect(row).toMatchObject({ errorCode: 'submit_unknown', unknownSubmits: 2 });
    expect(manifest).toHaveLength(20);
    // Every job beyond one per row belongs to a row flagged with an unknown outcome.
    expect(env.sim.stats().jobsCreated).toBeLessThanOrEqual(20 + unknownRows);
    expect(r.stdout).toContain(`${20 - failed.length} succeeded, ${failed.length} failed of 20`);
  });

  it('an unreachable gateway pauses the batch with the reason, and it goes on by itself', async () => {
    env = await testEnv({ jobSeconds: 1, seed: 7 });
    await env.startWorker();
    const csv = await uniqueCsv(env, 8);
    env.sim.refuseConnections(15_000);
    const p = runInBackground(env, [csv, '--concurrency', '3', '--unreachable-pause', '3']);
    const batchId = (await p.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    await until('the unreachable pause', async () =>
      /gateway unreachable since \d\d:\d\d UTC: .*(ECONNREFUSED|refused)/i.test(
        output(await command(env!, ['status', batchId])),
      ),
    );
    expect(env.sim.stats().jobsCreated).toBe(0);
    const r = await p.done;
    console.log(
      `unreachable: ${output(r).match(/PAUSED: gateway unreachable[^\n]*/)?.[0] ?? '(pause not printed)'}`,
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('8 succeeded, 0 failed of 8');
    expect(env.sim.stats().jobsCreated).toBe(8);
  });

  it('cancel ends within a bounded time while the gateway cannot be reached: unsent rows end cancelled, no job', async () => {
    env = await testEnv({ jobSeconds: 1, seed: 7 });
    await env.startWorker();
    const csv = await uniqueCsv(env, 6);
    env.sim.refuseConnections(600_000); // the whole test: nothing ever answers
    const p = runInBackground(env, [csv, '--concurrency', '3', '--unreachable-pause', '30']);
    const batchId = (await p.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    await until('submits being tried', async () =>
      /\b3 in flight\b/.test(output(await command(env!, ['status', batchId]))),
    );
    const asked = Date.now();
    const cancel = await command(env, ['cancel', batchId]);
    expect(cancel.code, output(cancel)).toBe(0);
    const r = await p.done;
    const seconds = (Date.now() - asked) / 1000;
    const manifest = await manifestRows(env, batchId);
    console.log(
      `cancel while unreachable: run ended ${seconds.toFixed(1)} s after cancel, exit ${r.code}, ${manifest.length} rows recorded`,
    );
    expect(r.code).toBe(3);
    expect(output(r)).toContain(`${batchId} was cancelled`);
    expect(seconds).toBeLessThan(90); // a bound, not a timing target: submits never sent do not hold a cancel
    expect(env.sim.stats().jobsCreated).toBe(0);
    for (const row of manifest) expect(row).toMatchObject({ status: 'failed', errorCode: 'cancelled' });
    for (const row of manifest) expect(row.jobId).toBeUndefined();
  });

  it('a re-run after --on-unknown-submit fail and cancel pays for no row twice', async () => {
    env = await testEnv({
      jobSeconds: 4,
      jobJitterSeconds: 1,
      seed: 9,
      faults: { scope: 'submit', error502After: 0.3 },
    });
    await env.startWorker();
    const csv = await uniqueCsv(env, 20);
    const p = runInBackground(env, [csv, '--concurrency', '4', '--on-unknown-submit', 'fail']);
    const batchId = (await p.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    await until('two unknown outcomes', () => env!.sim.stats().ambiguousSubmitsTotal >= 2);
    expect((await command(env, ['cancel', batchId])).code).toBe(0);
    await p.done;
    // Rows whose outcome stayed unknown: ended submit_unknown, or cancelled while a submit's outcome was unknown.
    const firstRun = await manifestRows(env, batchId);
    const kept = firstRun.filter((row) => !row.jobId && (row.unknownSubmits ?? 0) > 0);
    const keptAsUnknown = firstRun.filter((row) => row.errorCode === 'submit_unknown');
    env.sim.setFaults({ error502After: 0 });
    const cancelled = (await manifestRows(env, batchId)).filter((row) => row.errorCode === 'cancelled');
    expect(cancelled.length).toBeGreaterThan(0); // the batch was cancelled mid-way, not finished
    // No policy flag this time: the batch's own (--on-unknown-submit fail) is kept; the window given again applies.
    const again = await run(env, [csv, '--concurrency', '6']);
    expect(output(again)).toContain(
      `${batchId} was cancelled: running it again with its own options, except concurrency 4 -> 6 (given again)`,
    );
    expect((await previousInput(env.client, batchId))?.options).toMatchObject({
      onUnknownSubmit: 'fail',
      concurrency: 6,
    });
    const perRow = jobsByRow(env);
    const twice = [...perRow].filter(([, jobs]) => jobs.length > 1).map(([row]) => row);
    console.log(
      `re-run: ${env.sim.stats().jobsCreated} jobs for 20 rows, ${kept.length} rows kept with an unknown outcome (${keptAsUnknown.length} ended submit_unknown), rows billed twice: ${twice.length}; exit ${again.code}`,
    );
    expect(kept.length).toBeGreaterThan(0);
    expect(twice).toEqual([]);
    expect(env.sim.stats().jobsCreated).toBe(20);
    // The kept rows stay failed (retry-failed --code submit_unknown re-sends them deliberately).
    expect(again.code).toBe(3);
    expect(again.stdout).toContain(`${20 - kept.length} succeeded, ${kept.length} failed of 20`);
    const last = await readFile(join(env.dir, 'out', batchId, 'manifest.jsonl'), 'utf8');
    // Nothing new is recorded for them: their lines from the first run stand.
    expect(last.split('\n').filter((l) => l.includes('"submit_unknown"')).length).toBe(keptAsUnknown.length);
  });

  it('rows cancelled while their submit outcome was unknown are not re-sent by a re-run (--on-unknown-submit fail)', async () => {
    // Every submit makes its job and answers 30 s later; the worker gives up after 6 s: an unknown outcome.
    env = await testEnv({ jobSeconds: 1, seed: 5, faults: { scope: 'submit', slow: 1, slowMs: 30_000 } });
    await env.startWorker({ submitTimeoutMs: 6000 });
    const csv = await uniqueCsv(env, 6);
    const p = runInBackground(env, [csv, '--concurrency', '3', '--on-unknown-submit', 'fail']);
    const batchId = (await p.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    await until('3 jobs made, their answers not yet given', () => env!.sim.stats().jobsCreated === 3);
    expect((await command(env, ['cancel', batchId])).code).toBe(0);
    await p.done;
    const firstRun = await manifestRows(env, batchId);
    const unknown = firstRun.filter((row) => (row.unknownSubmits ?? 0) > 0 && !row.jobId);
    env.sim.setFaults({ slow: 0 });
    const again = await run(env, [csv]);
    const twice = [...jobsByRow(env)].filter(([, jobs]) => jobs.length > 1).map(([row]) => row);
    console.log(
      `cancelled with unknown outcomes: ${unknown.length} rows (${unknown.map((r) => r.errorCode).join(', ')}), ` +
        `${env.sim.stats().jobsCreated} jobs for 6 rows after the re-run, rows billed twice: ${twice.length}`,
    );
    expect(unknown).toHaveLength(3);
    expect(twice).toEqual([]);
    expect(env.sim.stats().jobsCreated).toBe(6);
    expect(again.stdout).toContain('3 succeeded, 3 failed of 6');
  });

  it('retry-failed re-sends a submit_unknown row with the original Idempotency-Key (no new job where it is honoured)', async () => {
    env = await testEnv({
      jobSeconds: 1,
      seed: 9,
      idempotency: true,
      faults: { scope: 'submit', error502After: 0.3 },
    });
    await env.startWorker();
    const csv = await uniqueCsv(env, 12);
    const first = await run(env, [csv, '--on-unknown-submit', 'fail']);
    const batchId = batchIdIn(first.stdout)!;
    const unknown = (await manifestRows(env, batchId)).filter((row) => row.errorCode === 'submit_unknown');
    expect(unknown.length).toBeGreaterThan(0);
    env.sim.setFaults({ error502After: 0 });
    const jobsBefore = env.sim.stats().jobsCreated;
    const retry = await command(env, ['retry-failed', batchId, '--code', 'submit_unknown', ...FAST]);
    const stats = env.sim.stats();
    console.log(
      `retry-failed: ${unknown.length} rows re-sent, ${stats.jobsCreated - jobsBefore} new jobs, ${stats.idempotentReplays} replayed by key; exit ${retry.code}`,
    );
    expect(retry.code).toBe(0);
    expect(retry.stdout).toContain(`${unknown.length} succeeded, 0 failed of ${unknown.length}`);
    expect(stats.jobsCreated).toBe(jobsBefore); // the gateway answered with the jobs the lost answers were about
    expect(stats.idempotentReplays).toBe(unknown.length);
  });

  it('a second retry-failed of the same batch leaves out the rows an earlier retry took (no row paid again)', async () => {
    env = await testEnv({
      jobSeconds: 0.5,
      seed: 3,
      faults: { jobFailure: 0.5, moderationWords: ['forbidden'] },
    });
    await env.startWorker();
    const tag = randomUUID().slice(0, 8);
    const lines = ['id,prompt', ...[1, 2, 3, 4, 5].map((i) => `r${i},a harbour at dusk ${tag} ${i}`)];
    lines.push(`r6,a forbidden harbour ${tag} 6`);
    await writeFile(join(env.dir, 'twice.csv'), lines.join('\n') + '\n');
    const first = await run(env, ['twice.csv']);
    const batchId = batchIdIn(first.stdout)!;
    const generationFailed = (await manifestRows(env, batchId))
      .filter((row) => row.errorCode === 'generation_failed')
      .map((row) => row.rowId);
    expect(generationFailed.length).toBeGreaterThan(0);
    env.sim.setFaults({ jobFailure: 0 });
    const retry = await command(env, ['retry-failed', batchId, '--code', 'generation_failed', ...FAST]);
    expect(retry.code, output(retry)).toBe(0);
    const retryId = /Started (batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(retry.stderr)![1]!;
    // Later, every failed row: those the first retry took go on there, not here.
    const again = await command(env, ['retry-failed', batchId, ...FAST]);
    const perRow = jobsByRow(env);
    console.log(
      `second retry-failed: ${generationFailed.length} rows left out, jobs per row ${JSON.stringify(Object.fromEntries([...perRow].map(([r, j]) => [r, j.length])))}`,
    );
    expect(again.stderr).toContain(
      `${generationFailed.length} row(s) left out: an earlier retry-failed took them (${retryId})`,
    );
    // r6, refused for its content, is left out too: only `--code content_moderation` sends it again.
    expect(again.stderr).toContain('1 row(s) left out: the gateway refused their content');
    expect(again.stdout).toContain('no failed rows besides those left out; nothing to retry');
    expect(perRow.get('r6')).toHaveLength(1);
    for (const row of generationFailed) expect(perRow.get(row), row).toHaveLength(2); // the first job and the retry's
  });

  it('a batch terminated while submits were on the wire is re-run only after they recorded their jobs', async () => {
    // Every submit is answered 7 s after the job was made: still on the wire when the re-run starts (unless
    // a loaded machine takes longer to start it), and inside the attempt's HTTP timeout.
    env = await testEnv({ jobSeconds: 1, seed: 4, faults: { scope: 'submit', slow: 1, slowMs: 7000 } });
    await env.startWorker({ submitTimeoutMs: 20_000 }); // the worker waits for the late answers
    const csv = await uniqueCsv(env, 6);
    const p = runInBackground(env, [csv, '--concurrency', '6', '--submit-timeout', '12']);
    const batchId = (await p.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    await until('6 jobs made, their answers on the way', () => env!.sim.stats().jobsCreated === 6);
    await env.client.workflow.getHandle(batchId).terminate('test: terminated with submits on the wire');
    await p.done;
    env.sim.setFaults({ slow: 0 });
    const again = await run(env, [csv, '--concurrency', '6']);
    // The re-run waited for the answers still on the wire, unless they had all landed by the time it started.
    const waited = /was terminated \d+ s ago with (\d+) row\(s\) submitting: waiting up to \d+ s/.exec(
      output(again),
    );
    console.log(
      `terminated re-run: ${env.sim.stats().jobsCreated} jobs for 6 rows; exit ${again.code}; ` +
        (waited ? `waited for ${waited[1]} rows' answers` : 'every answer had landed before it started'),
    );
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('6 succeeded, 0 failed of 6');
    expect(env.sim.stats().jobsCreated).toBe(6);
  });

  it('--max-submissions caps the POSTs of the batch whole life, across a cancel and a re-run', async () => {
    env = await testEnv({ jobSeconds: 1, jobJitterSeconds: 0.2, seed: 2 });
    await env.startWorker();
    const csv = await uniqueCsv(env, 10);
    const p = runInBackground(env, [csv, '--concurrency', '1', '--max-submissions', '6']);
    const batchId = (await p.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    await until('3 rows finished', async () => (await manifestRows(env!, batchId)).length >= 3);
    expect((await command(env, ['cancel', batchId])).code).toBe(0);
    await p.done;
    const first = env.sim.stats().jobsCreated;
    const again = await run(env, [csv, '--concurrency', '1', '--max-submissions', '6']);
    console.log(
      `spend cap: ${first} jobs before the cancel, ${env.sim.stats().jobsCreated} in all; exit ${again.code}`,
    );
    expect(again.stdout).toMatch(/Stopped early: 6 jobs submitted \(--max-submissions 6\)/);
    expect(env.sim.stats().jobsCreated).toBe(6);
  });

  it('a re-run whose finished rows already hold the --max-submissions cap starts no row', async () => {
    env = await testEnv({ jobSeconds: 1, jobJitterSeconds: 0.2, seed: 3 });
    await env.startWorker();
    const csv = await uniqueCsv(env, 10);
    const p = runInBackground(env, [csv, '--concurrency', '1']);
    const batchId = (await p.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    await until('3 rows finished', async () => (await manifestRows(env!, batchId)).length >= 3);
    expect((await command(env, ['pause', batchId])).code).toBe(0);
    // Paused with nothing in flight: every job made is a finished row.
    await until(
      'the row in flight finished',
      async () => (await manifestRows(env!, batchId)).length === env!.sim.stats().jobsCreated,
    );
    expect((await command(env, ['cancel', batchId])).code).toBe(0);
    await p.done;
    const spent = env.sim.stats().jobsCreated;
    const again = await run(env, [csv, '--concurrency', '1', '--max-submissions', String(spent)]);
    console.log(
      `cap already spent: ${spent} jobs before, ${env.sim.stats().jobsCreated} after; exit ${again.code}`,
    );
    expect(again.stdout).toContain(`Stopped early: ${spent} jobs submitted (--max-submissions ${spent})`);
    expect(env.sim.stats().jobsCreated).toBe(spent);
  });
});
