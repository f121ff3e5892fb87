// The target (the account money is spent on) from the command line: the real `vidbatch` (spawned) in a temp
// folder with the folder's own Temporal server (no TEMPORAL_ADDRESS), against simulators over real HTTP that
// ignore Idempotency-Key (only vidbatch's own records stop a second payment). A `--simulate` try-out and the real
// run of one file are separate batches that never share a video; a batch paused because its key was revoked
// goes on when its file is run again with a new key; `cancel` ends a batch whose process was killed. Every
// figure comes from the simulators' counters, the manifests and what the commands print.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, realpath, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { gatewayTarget } from '../../src/config';
import { readManifest } from '../../src/results/manifest';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/server';
import {
  background,
  exitAndOutput,
  FAST_POLL_FLAGS,
  manifestPathOf,
  vidbatch,
  type CliRun,
} from './cli-helpers';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const BATCH = 'batch-[0-9a-f]{16}-[0-9a-f]{8}';

/** A test's folder, by its real path (what the spawned command's working directory resolves to). */
async function folder(): Promise<string> {
  return realpath(await mkdtemp(join(tmpdir(), 'vidbatch-target-')));
}

/** A simulator that plays the paid gateway (Idempotency-Key ignored), closed after the test. */
async function simulator(options: SimulatorOptions): Promise<Simulator> {
  const sim = await startSimulator({ idempotency: false, ...options });
  cleanups.push(() => sim.close());
  return sim;
}

/** The simulator's counters, read as a user would: GET /admin/stats. */
async function statsOf(sim: Simulator): Promise<{ jobsCreated: number; jobsCompleted: number }> {
  const res = await fetch(`${sim.origin}/admin/stats`);
  expect(res.status).toBe(200);
  return (await res.json()) as { jobsCreated: number; jobsCompleted: number };
}

/** `n` rows `r1..rn` with prompts unique to this test; returns the prompts. */
async function writeCsv(path: string, words: string, n: number, edit?: (rows: string[]) => void) {
  const prompts = Array.from({ length: n }, (_, i) => `${words} ${i + 1}`);
  edit?.(prompts);
  await writeFile(path, ['id,prompt', ...prompts.map((p, i) => `r${i + 1},${p}`)].join('\n') + '\n');
  return prompts;
}

/** The id and target of the "Started batch ..." / "Attached to batch ..." line. */
function startedLine(r: CliRun | string): { how: string; batchId: string; target: string } | undefined {
  const text = typeof r === 'string' ? r : r.stderr;
  const m = new RegExp(`(Started|Attached to) batch (${BATCH}) \\(\\d+ prompts\\) for (\\S+)`).exec(text);
  return m ? { how: m[1]!, batchId: m[2]!, target: m[3]! } : undefined;
}

async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  output: () => string,
  ms = 90_000,
) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${output()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The count the summary gives of rows that may have been billed twice (0 when it says none). */
const unknownRows = (out: string) =>
  Number(/(\d+) rows? had a submit with an unknown outcome/.exec(out)?.[1] ?? 0);

describe('a --simulate try-out, then the real run of the same file, then an edited copy', () => {
  it('are separate batches: the real gateway pays once per row, reuses only its own videos, and status/list say which target', async () => {
    const dir = await folder();
    const tag = randomUUID().slice(0, 8);
    const words = `a paper boat drifting down a canal ${tag}`;
    const prompts = await writeCsv(join(dir, 'x.csv'), words, 12);

    // The try-out: the folder's simulator, its own target.
    const tryOut = await vidbatch(
      ['run', 'x.csv', '--simulate', '--sim-job-seconds', '1', ...FAST_POLL_FLAGS],
      {
        cwd: dir,
      },
    );
    expect(tryOut.code, exitAndOutput(tryOut)).toBe(0);
    expect(tryOut.stdout).toContain('12 succeeded, 0 failed of 12');
    const simulated = startedLine(tryOut);
    const simulateTarget = `simulate:${join(dir, '.vidbatch', 'simulator-state.json')}`;
    expect(simulated, exitAndOutput(tryOut)).toMatchObject({ how: 'Started', target: simulateTarget });
    const tryJobs = (
      JSON.parse(await readFile(join(dir, '.vidbatch', 'simulator-state.json'), 'utf8')) as {
        jobs: { id: string; prompt: string }[];
      }
    ).jobs;
    expect(tryJobs.map((j) => j.prompt).sort()).toEqual([...prompts].sort());

    // The real run of the same file: a batch of its own, every row paid on the real gateway.
    const sim = await simulator({ apiKeys: ['sk-the-real-gateway'], jobSeconds: 1, jobJitterSeconds: 0.3 });
    const env = { GATEWAY_BASE_URL: sim.baseUrl, GATEWAY_API_KEY: 'sk-the-real-gateway' };
    const realTarget = gatewayTarget(sim.baseUrl);
    const real = await vidbatch(['run', 'x.csv', ...FAST_POLL_FLAGS], { cwd: dir, env });
    const afterReal = await statsOf(sim);
    console.log(`real run after a try-out: ${afterReal.jobsCreated} jobs on the real gateway for 12 rows`);
    expect(real.code, exitAndOutput(real)).toBe(0);
    expect(real.stdout).toContain('12 succeeded, 0 failed of 12');
    const realBatch = startedLine(real);
    expect(realBatch, exitAndOutput(real)).toMatchObject({ how: 'Started', target: realTarget });
    expect(realBatch!.batchId).not.toBe(simulated!.batchId);
    // One file: the same CSV part of the id, another scope.
    expect(realBatch!.batchId.slice(0, 22)).toBe(simulated!.batchId.slice(0, 22));
    expect(afterReal.jobsCreated).toBe(12);
    expect(real.stdout).not.toMatch(/reuse/);
    const realManifestPath = manifestPathOf(real);
    expect(realManifestPath).toBe(join(dir, 'out', realBatch!.batchId, 'manifest.jsonl'));
    const realRows = await readManifest(realManifestPath);
    expect(realRows).toHaveLength(12);
    const tryJobIds = new Set(tryJobs.map((j) => j.id));
    for (const row of realRows) {
      expect(row.status, row.rowId).toBe('succeeded');
      expect(row.reusedFrom, row.rowId).toBeUndefined();
      expect(sim.state.jobs.has(row.jobId!), row.rowId).toBe(true); // the real gateway's job
      expect(tryJobIds.has(row.jobId!), row.rowId).toBe(false);
      expect(row.url?.startsWith(sim.origin), row.rowId).toBe(true);
      expect(row.file).toBe(join(dir, 'out', realBatch!.batchId, `${row.rowId}.mp4`));
      expect(existsSync(row.file!)).toBe(true);
    }
    expect([...sim.state.jobs.values()].map((j) => j.prompt).sort()).toEqual([...prompts].sort());

    // An edited copy, run for real: one new job; the other 11 rows reuse the real batch's videos, never the
    // try-out's.
    const editedPrompts = await writeCsv(join(dir, 'y.csv'), words, 12, (p) => (p[4] = `${p[4]} at dusk`));
    const edited = await vidbatch(['run', 'y.csv', ...FAST_POLL_FLAGS], { cwd: dir, env });
    const afterEdit = await statsOf(sim);
    console.log(`edited copy: ${afterEdit.jobsCreated} jobs on the real gateway in all (12 + 1 changed row)`);
    expect(edited.code, exitAndOutput(edited)).toBe(0);
    expect(edited.stdout).toContain('12 succeeded, 0 failed of 12');
    expect(edited.stdout).toContain('11 rows reuse videos another batch in this output root paid for');
    const editedBatch = startedLine(edited);
    expect(editedBatch, exitAndOutput(edited)).toMatchObject({ how: 'Started', target: realTarget });
    expect(afterEdit.jobsCreated).toBe(13);
    const editedRows = await readManifest(manifestPathOf(edited));
    const reused = editedRows.filter((r) => r.reusedFrom);
    expect(reused.map((r) => r.reusedFrom!.batchId)).toEqual(Array(11).fill(realBatch!.batchId));
    expect(editedRows.filter((r) => !r.reusedFrom).map((r) => r.rowId)).toEqual(['r5']);
    const r5 = editedRows.find((r) => r.rowId === 'r5')!;
    expect(r5.prompt).toBe(editedPrompts[4]);
    expect(sim.state.jobs.get(r5.jobId!)?.prompt).toBe(editedPrompts[4]);

    // status of the file (no gateway set here): it has two batches, says so, and shows the latest with its target.
    const status = await vidbatch(['status', 'x.csv'], { cwd: dir });
    expect(status.code, exitAndOutput(status)).toBe(0);
    expect(status.stderr).toContain('x.csv has 2 batches (');
    expect(status.stderr).toContain(`${simulated!.batchId} for ${simulateTarget}`);
    expect(status.stderr).toContain(`${realBatch!.batchId} for ${realTarget}`);
    expect(status.stderr).toContain(`using ${realBatch!.batchId}`);
    expect(status.stdout).toContain(`${realBatch!.batchId}: COMPLETED`);
    expect(status.stdout).toContain(`target: ${realTarget}`);
    // With the real gateway's settings, the batch of that scope is the one shown.
    const own = await vidbatch(['status', 'x.csv'], { cwd: dir, env });
    expect(own.code, exitAndOutput(own)).toBe(0);
    expect(own.stdout).toContain(`${realBatch!.batchId}: COMPLETED`);
    // The try-out, named by its id, says its own target.
    const tryStatus = await vidbatch(['status', simulated!.batchId], { cwd: dir });
    expect(tryStatus.code, exitAndOutput(tryStatus)).toBe(0);
    expect(tryStatus.stdout).toContain(`${simulated!.batchId}: COMPLETED`);
    expect(tryStatus.stdout).toContain(`target: ${simulateTarget}`);

    // list: all three, each with its target.
    const list = await vidbatch(['list'], { cwd: dir });
    expect(list.code, exitAndOutput(list)).toBe(0);
    const lineOf = (id: string) => list.stdout.split('\n').find((l) => l.startsWith(id)) ?? '';
    expect(lineOf(simulated!.batchId)).toMatch(/COMPLETED/);
    expect(lineOf(simulated!.batchId)).toContain(`12 ok, 0 failed of 12  for ${simulateTarget}`);
    expect(lineOf(realBatch!.batchId)).toContain(`12 ok, 0 failed of 12  for ${realTarget}`);
    expect(lineOf(editedBatch!.batchId)).toContain(`for ${realTarget}`);
    // Nothing of the real runs reached the try-out's simulator.
    const tryJobsAfter = (
      JSON.parse(await readFile(join(dir, '.vidbatch', 'simulator-state.json'), 'utf8')) as {
        jobs: unknown[];
      }
    ).jobs;
    expect(tryJobsAfter).toHaveLength(12);
  }, 400_000);
});

describe('a key revoked mid-batch', () => {
  it('pauses the batch; after Ctrl-C, running the file with a new key resumes it and pays for no row twice', async () => {
    const dir = await folder();
    const rows = 30;
    const tag = randomUUID().slice(0, 8);
    const prompts = await writeCsv(join(dir, 'k.csv'), `a lantern in the snow ${tag}`, rows);
    const KEY = 'sk-first-key-revoked-later';
    const sim = await simulator({ apiKeys: [KEY], jobSeconds: 3, jobJitterSeconds: 0.5 });
    const env = { GATEWAY_BASE_URL: sim.baseUrl };

    const first = background(['run', 'k.csv', '--concurrency', '4', ...FAST_POLL_FLAGS], {
      cwd: dir,
      env: { ...env, GATEWAY_API_KEY: KEY },
    });
    cleanups.push(() => first.stop());
    const started = startedLine((await first.waitFor(new RegExp(`Started batch ${BATCH}.*`), 120_000))[0]);
    expect(started?.target).toBe(gatewayTarget(sim.baseUrl));
    const batchId = started!.batchId;
    await until('4 jobs completed', async () => (await statsOf(sim)).jobsCompleted >= 4, first.output);

    const old = sim.state.findKey(KEY)!;
    const disabled = await fetch(`${sim.origin}/admin/keys/${old.id}/disable`, { method: 'POST' });
    expect(disabled.status).toBe(200);
    await first.waitFor(/PAUSED: the gateway refused the API key/, 90_000);
    const atPause = await statsOf(sim);
    console.log(`key revoked: paused with ${atPause.jobsCreated} of ${rows} rows paid`);
    expect(atPause.jobsCreated).toBeLessThan(rows);

    const stopped = await first.stop(); // Ctrl-C
    expect(stopped.code, exitAndOutput(stopped)).toBe(130);
    expect(stopped.stderr).toContain(`Stopped following ${batchId}`);

    // A new key from the console, and the same file run again with it.
    const created = await fetch(`${sim.origin}/admin/keys`, {
      method: 'POST',
      body: JSON.stringify({ description: 'rotated' }),
    });
    expect(created.status).toBe(201);
    const { key: newKey } = (await created.json()) as { key: string };
    const second = await vidbatch(['run', 'k.csv', ...FAST_POLL_FLAGS], {
      cwd: dir,
      env: { ...env, GATEWAY_API_KEY: newKey },
    });
    const after = await statsOf(sim);
    console.log(
      `new key: exit ${second.code}, ${after.jobsCreated} jobs for ${rows} rows, ${unknownRows(second.stdout)} rows with an unknown submit`,
    );
    expect(second.code, exitAndOutput(second)).toBe(0);
    expect(startedLine(second)).toMatchObject({ how: 'Attached to', batchId });
    expect(second.stderr).toContain(`${batchId} was paused: the gateway refused the API key`);
    expect(second.stderr).toContain("Resumed with this process's key");
    expect(second.stdout).toContain(`${rows} succeeded, 0 failed of ${rows}`);
    expect(unknownRows(second.stdout)).toBe(0);

    // Nothing paid twice: one job per row, every prompt once.
    expect(after.jobsCreated).toBe(rows);
    const paid = [...sim.state.jobs.values()].map((j) => j.prompt).sort();
    expect(paid).toEqual([...prompts].sort());
    const manifest = await readManifest(manifestPathOf(second));
    expect(manifest).toHaveLength(rows);
    expect(manifest.every((r) => r.status === 'succeeded')).toBe(true);
    expect(new Set(manifest.map((r) => r.jobId)).size).toBe(rows);
  }, 400_000);
});

describe('cancel of a batch no worker serves', () => {
  it('terminates it after the wait; status shows it ended; running the file again finishes it, no row paid twice', async () => {
    const dir = await folder();
    const rows = 12;
    const tag = randomUUID().slice(0, 8);
    const prompts = await writeCsv(join(dir, 'c.csv'), `a heron in the reeds ${tag}`, rows);
    const KEY = 'sk-cancel-unserved';
    const sim = await simulator({ apiKeys: [KEY], jobSeconds: 4, jobJitterSeconds: 0 });
    const env = { GATEWAY_BASE_URL: sim.baseUrl, GATEWAY_API_KEY: KEY };

    // A lasting server in the folder, so the batch outlives the run that is killed below.
    const server = background(['server'], { cwd: dir });
    cleanups.push(() => server.stop());
    await server.waitFor(/Temporal gRPC address/, 120_000);

    const run = background(['run', 'c.csv', '--concurrency', '3', ...FAST_POLL_FLAGS], { cwd: dir, env });
    cleanups.push(() => run.stop());
    const batchId = (await run.waitFor(new RegExp(`Started batch (${BATCH})`), 120_000))[1]!;
    await until('3 jobs made', async () => (await statsOf(sim)).jobsCreated >= 3, run.output);
    // Every submit of the window answered (and journalled) before the kill: no submit is left on the wire.
    await new Promise((r) => setTimeout(r, 1500));
    run.child.kill('SIGKILL'); // no graceful shutdown: the batch stays RUNNING with no worker
    await run.done;
    const atKill = await statsOf(sim);
    console.log(`killed with ${atKill.jobsCreated} jobs made`);
    expect(atKill.jobsCreated).toBeLessThan(rows);

    // status of the batch no worker serves: still RUNNING, and said promptly (no minute-long wait for an answer).
    const statusAt = Date.now();
    const before = await vidbatch(['status', batchId], { cwd: dir });
    const statusSeconds = Math.round((Date.now() - statusAt) / 1000);
    console.log(`status of the unserved batch took ${statusSeconds} s`);
    expect(before.code, exitAndOutput(before)).toBe(0);
    expect(before.stdout).toContain(`${batchId}: RUNNING`);
    expect(before.stdout).toContain('progress: no worker answered');
    expect(statusSeconds).toBeLessThan(30);

    const startedAt = Date.now();
    const cancel = await vidbatch(['cancel', 'c.csv'], { cwd: dir });
    console.log(`cancel of the unserved batch took ${Math.round((Date.now() - startedAt) / 1000)} s`);
    expect(cancel.code, exitAndOutput(cancel)).toBe(0);
    expect(cancel.stdout).toContain(`${batchId}: terminated (no worker serves it`);

    const after = await vidbatch(['status', batchId], { cwd: dir });
    expect(after.stdout, exitAndOutput(after)).toContain(`${batchId}: TERMINATED`);
    expect(after.code).toBe(1); // not running, not completed

    const again = await vidbatch(['run', 'c.csv', ...FAST_POLL_FLAGS], { cwd: dir, env });
    const stats = await statsOf(sim);
    console.log(`run again after the cancel: exit ${again.code}, ${stats.jobsCreated} jobs for ${rows} rows`);
    expect(again.code, exitAndOutput(again)).toBe(0);
    expect(again.stderr).toContain(`${batchId} was terminated: running it again`);
    expect(again.stdout).toContain(`${rows} succeeded, 0 failed of ${rows}`);
    expect(unknownRows(again.stdout)).toBe(0);
    expect(stats.jobsCreated).toBe(rows);
    expect([...sim.state.jobs.values()].map((j) => j.prompt).sort()).toEqual([...prompts].sort());
  }, 400_000);

  it('of a batch a live run serves is run by that worker at once: the run says cancelled (exit 3)', async () => {
    const dir = await folder();
    const tag = randomUUID().slice(0, 8);
    await writeCsv(join(dir, 'live.csv'), `a kite over the dunes ${tag}`, 12);
    const KEY = 'sk-cancel-served';
    const sim = await simulator({ apiKeys: [KEY], jobSeconds: 4, jobJitterSeconds: 0 });
    const server = background(['server'], { cwd: dir });
    cleanups.push(() => server.stop());
    await server.waitFor(/Temporal gRPC address/, 120_000);
    const run = background(['run', 'live.csv', '--concurrency', '3', ...FAST_POLL_FLAGS], {
      cwd: dir,
      env: { GATEWAY_BASE_URL: sim.baseUrl, GATEWAY_API_KEY: KEY },
    });
    cleanups.push(() => run.stop());
    const batchId = (await run.waitFor(new RegExp(`Started batch (${BATCH})`), 120_000))[1]!;
    await until('3 jobs made', async () => (await statsOf(sim)).jobsCreated >= 3, run.output);

    const startedAt = Date.now();
    const cancel = await vidbatch(['cancel', batchId], { cwd: dir });
    const seconds = Math.round((Date.now() - startedAt) / 1000);
    console.log(`cancel of a served batch took ${seconds} s`);
    expect(cancel.code, exitAndOutput(cancel)).toBe(0);
    expect(cancel.stdout).toContain(`${batchId}: cancellation requested`);
    const ended = await run.done;
    expect(ended.code, exitAndOutput(ended)).toBe(3);
    expect(ended.stderr).toContain(`${batchId} was cancelled`);
    const after = await vidbatch(['status', batchId], { cwd: dir });
    expect(after.stdout, exitAndOutput(after)).toContain(`${batchId}: CANCELLED`);
    expect((await statsOf(sim)).jobsCreated).toBeLessThan(12);
  }, 300_000);
});
