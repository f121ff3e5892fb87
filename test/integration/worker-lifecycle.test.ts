// A worker's life as an operator sees it: it refuses to start without a key (before connecting anywhere), says
// it is ready through VIDBATCH_READY_FILE, and on SIGTERM lets a submit on the wire finish and exits 0, so a
// new worker finishes the batch with that job and no second one.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultPayloadConverter } from '@temporalio/common';
import { afterEach, describe, expect, it } from 'vitest';
import { startBatch } from '../../src/client/batches';
import { idempotencyKey } from '../../src/activities/jobs';
import { readManifest } from '../../src/results/manifest';
import { writeVbenchCsv } from '../../bench/vbench';
import { cliEnv, FAST_POLL, testEnv, type TestEnv } from './helpers';

const CLI = fileURLToPath(new URL('../../bin/vidbatch.mjs', import.meta.url));

let env: TestEnv | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  await env?.close();
  env = undefined;
});

interface Exit {
  code: number | null;
  stderr: string;
}

function vidbatch(args: string[], environment: NodeJS.ProcessEnv, cwd?: string): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: environment,
      cwd,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(child);
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stderr }));
  });
}

/** A TCP listener standing in for Temporal, counting who connects to it. */
async function countingListener(): Promise<{ address: string; connections: () => number; server: Server }> {
  let connections = 0;
  const server = createServer((socket) => {
    connections += 1;
    socket.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return { address: `127.0.0.1:${port}`, connections: () => connections, server };
}

/** The environment of this process without any gateway key. */
function withoutKey(extra: Record<string, string>): NodeJS.ProcessEnv {
  const e = { ...process.env };
  delete e.GATEWAY_API_KEY;
  delete e.GATEWAY_API_KEY_FILE;
  return { ...e, ...extra };
}

async function waitFor(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('a worker without a gateway key', () => {
  it('`vidbatch worker` exits 2 naming GATEWAY_API_KEY, before connecting to Temporal', async () => {
    const temporal = await countingListener();
    try {
      const run = await vidbatch(
        ['worker'],
        withoutKey({ TEMPORAL_ADDRESS: temporal.address, GATEWAY_BASE_URL: 'http://127.0.0.1:9/v1' }),
      );
      expect(run.code).toBe(2);
      expect(run.stderr).toContain('GATEWAY_API_KEY is not set');
      expect(run.stderr).toContain('GATEWAY_API_KEY_FILE');
      expect(temporal.connections()).toBe(0);
    } finally {
      temporal.server.close();
    }
  });

  it('`vidbatch worker` checks GATEWAY_API_KEY_FILE at start: missing and empty files exit 2 naming it', async () => {
    const temporal = await countingListener();
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-keyfile-'));
    const empty = join(dir, 'empty-key');
    await writeFile(empty, '\n');
    try {
      const base = { TEMPORAL_ADDRESS: temporal.address, GATEWAY_BASE_URL: 'http://127.0.0.1:9/v1' };
      const missing = await vidbatch(
        ['worker'],
        withoutKey({ ...base, GATEWAY_API_KEY_FILE: join(dir, 'no-such-key') }),
      );
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain(`GATEWAY_API_KEY_FILE (${join(dir, 'no-such-key')}) cannot be read`);
      const blank = await vidbatch(['worker'], withoutKey({ ...base, GATEWAY_API_KEY_FILE: empty }));
      expect(blank.code).toBe(2);
      expect(blank.stderr).toContain(`GATEWAY_API_KEY_FILE (${empty}) is empty`);
      expect(temporal.connections()).toBe(0);
    } finally {
      temporal.server.close();
    }
  });

  it('`vidbatch run` (which needs an in-process worker) exits 2 naming GATEWAY_API_KEY before starting a server', async () => {
    const cwd = await mkdtemp(join(tmpdir(), 'vidbatch-nokey-'));
    await writeVbenchCsv(join(cwd, 'prompts.csv'), 2);
    const environment = withoutKey({ GATEWAY_BASE_URL: 'http://127.0.0.1:9/v1' });
    delete environment.TEMPORAL_ADDRESS;
    const run = await vidbatch(['run', 'prompts.csv'], environment, cwd);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('GATEWAY_API_KEY is not set');
    // No dev server was started: it would have made its state folder here.
    expect(existsSync(join(cwd, '.vidbatch'))).toBe(false);
  });
});

describe('a worker stopped with SIGTERM during a submit', () => {
  it('finishes the submit, exits 0 within the grace period, and a new worker completes the row with that job', async () => {
    // Every submit's answer comes 3 s after the job was made: a stop in that window catches one on the wire.
    env = await testEnv({ jobSeconds: 0.5, faults: { slow: 1, slowMs: 3000, scope: 'submit' } });
    const graceMs = 10_000;
    const readyFile = join(env.dir, 'worker.ready');
    const workerEnv = cliEnv(env, {
      GATEWAY_TIMEOUT_MS: '8000',
      VIDBATCH_OUT_ROOT: join(env.dir, 'out'),
      VIDBATCH_SHUTDOWN_GRACE_MS: String(graceMs),
      VIDBATCH_READY_FILE: readyFile,
    });
    let logs = '';
    const first = spawn(process.execPath, [CLI, 'worker'], {
      env: workerEnv,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(first);
    first.stderr.on('data', (d: Buffer) => (logs += d.toString()));
    await waitFor(() => existsSync(readyFile) || first.exitCode !== null, 60_000, 'the ready file');
    expect(first.exitCode, logs).toBeNull();

    const csv = join(env.dir, 'one.csv');
    const rowId = (await writeVbenchCsv(csv, 1))[0]![0]!;
    const { handle, batchId } = await startBatch(env.session, csv, {
      poll: FAST_POLL,
      activityTimeoutMs: 20_000,
      outDir: join(env.dir, 'out'),
    });
    // The job exists at the gateway; its answer is still 3 s away.
    await waitFor(() => env!.sim.stats().jobsCreated === 1, 60_000, 'the submit to reach the gateway');
    const stoppedAt = Date.now();
    first.kill('SIGTERM');
    await waitFor(() => !existsSync(readyFile), 2_000, 'the ready file to go at SIGTERM');
    const code = await new Promise<number | null>((r) =>
      first.exitCode !== null ? r(first.exitCode) : first.once('exit', (c) => r(c)),
    );
    const stoppedInMs = Date.now() - stoppedAt;
    expect(code, logs).toBe(0);
    expect(stoppedInMs).toBeLessThan(graceMs);
    // Told why it is still up; how many activities were running then is incidental (a readRows or a
    // recordResults may be running too).
    expect(logs).toContain('SIGTERM: vidbatch worker stopping: no new tasks, no new gateway requests');

    // The stopped worker delivered the submit's result: the job id is in the prompt's history.
    const prompt = env.client.workflow.getHandle(`${batchId}/${rowId}`);
    const events = (await prompt.fetchHistory()).events ?? [];
    const completedSubmits = events.filter((e) => e.activityTaskCompletedEventAttributes);
    expect(completedSubmits).toHaveLength(1);
    const [jobId] = [...env.sim.state.jobs.keys()];
    const submitted = defaultPayloadConverter.fromPayload<{ jobId: string }>(
      completedSubmits[0]!.activityTaskCompletedEventAttributes!.result!.payloads![0]!,
    );
    expect(submitted.jobId).toBe(jobId);

    env.sim.setFaults({ slow: 0 });
    const second = spawn(process.execPath, [CLI, 'worker'], { env: workerEnv, stdio: 'ignore' });
    children.push(second);
    const result = await handle.result();
    expect(result).toMatchObject({ total: 1, succeeded: 1, failed: 0 });
    const [row] = await readManifest(result.manifestPath);
    expect(row).toMatchObject({ rowId, status: 'succeeded', jobId, attempts: 1 });
    const stats = env.sim.stats();
    expect(stats.jobsCreated).toBe(1);
    expect(stats.requests['POST /v1/videos/generations']?.[200] ?? 0).toBe(1);
  });
});

describe('a worker stopped with SIGTERM while submits wait on a slow gateway', () => {
  it('waits past its grace for every submit on the wire, exits 0: one job per row, no unknown outcome', async () => {
    // Each submit is answered 12 s after its job was made, far past the 2 s grace. A worker that gave up after
    // grace + GATEWAY_TIMEOUT_MS + 5 s (here 10 s) would exit 1 with those answers lost: each row would count an
    // unknown outcome and be submitted (and billed) again.
    const slowMs = 12_000;
    env = await testEnv({ jobSeconds: 0.5, faults: { slow: 1, slowMs, scope: 'submit' } });
    const out = join(env.dir, 'out');
    const readyFile = join(env.dir, 'worker.ready');
    const workerEnv = cliEnv(env, {
      GATEWAY_TIMEOUT_MS: '3000',
      GATEWAY_SUBMIT_TIMEOUT_MS: '20000',
      VIDBATCH_SHUTDOWN_GRACE_MS: '2000',
      VIDBATCH_OUT_ROOT: out,
      VIDBATCH_READY_FILE: readyFile,
    });
    let logs = '';
    const first = spawn(process.execPath, [CLI, 'worker'], {
      env: workerEnv,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(first);
    first.stderr.on('data', (d: Buffer) => (logs += d.toString()));
    await waitFor(() => existsSync(readyFile) || first.exitCode !== null, 60_000, 'the ready file');
    expect(first.exitCode, logs).toBeNull();

    const rows = 8;
    const csv = join(env.dir, 'eight.csv');
    const rowIds = (await writeVbenchCsv(csv, rows)).map((r) => r[0]!);
    const { handle, batchId } = await startBatch(env.session, csv, { poll: FAST_POLL, outDir: out });
    // Some submits are on the wire (jobs made, answers 12 s away), the others wait on the gateway queue's rate
    // limit: those are not sent by the stopping worker (test/unit/gateway-client.test.ts checks that exactly).
    await waitFor(() => env!.sim.stats().jobsCreated >= 3, 60_000, 'submits to reach the gateway');
    const stoppedAt = Date.now();
    const atStop = env.sim.stats().jobsCreated;
    first.kill('SIGTERM');
    const code = await new Promise<number | null>((r) =>
      first.exitCode !== null ? r(first.exitCode) : first.once('exit', (c) => r(c)),
    );
    const stoppedInMs = Date.now() - stoppedAt;
    const byFirst = env.sim.stats().jobsCreated;
    console.log(
      `SIGTERM with ${atStop} submits on the wire: exit ${code} after ${stoppedInMs} ms; the stopping worker made ${byFirst} jobs`,
    );
    expect(code, logs).toBe(0);
    expect(logs).not.toContain('GracefulShutdownPeriodExpiredError');
    // It waited for the answers (12 s), and not for anything else: the force time is 20 s + 10 s.
    expect(stoppedInMs).toBeGreaterThan(slowMs - 2_000);
    expect(stoppedInMs).toBeLessThan(30_000);
    // Every answer reached its client: no job was made whose id was lost.
    expect(env.sim.stats().ambiguousSubmitsTotal).toBe(0);

    env.sim.setFaults({ slow: 0 });
    const second = spawn(process.execPath, [CLI, 'worker'], { env: workerEnv, stdio: 'ignore' });
    children.push(second);
    const result = await handle.result();
    expect(result).toMatchObject({ total: rows, succeeded: rows, failed: 0 });
    expect(result.unknownSubmitRows ?? 0).toBe(0);
    const manifest = await readManifest(result.manifestPath);
    expect(manifest.filter((r) => (r.unknownSubmits ?? 0) > 0)).toEqual([]);
    // Exactly one job per row at the gateway.
    const jobsPerRow = new Map<string, number>();
    for (const job of env.sim.state.jobs.values())
      jobsPerRow.set(job.idempotencyKey!, (jobsPerRow.get(job.idempotencyKey!) ?? 0) + 1);
    expect(Object.fromEntries(jobsPerRow)).toEqual(
      Object.fromEntries(rowIds.map((id) => [idempotencyKey(batchId, id), 1])),
    );
  });
});
