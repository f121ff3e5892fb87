// Which server the commands of one folder use, without TEMPORAL_ADDRESS: `vidbatch server` and `vidbatch run`
// own the SQLite file; operator commands run beside them talk to their server (never a SQLITE_BUSY);
// `run --detach` needs a lasting server; `retry-failed` on the embedded server runs and follows its batch.
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { writeVbenchCsv } from '../../bench/vbench';
import { startSimulator, type Simulator } from '../../src/simulator/server';
import { background, vidbatch } from './cli-helpers';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function folder(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'vidbatch-cli-server-'));
}

async function simulator(options: Parameters<typeof startSimulator>[0] = {}): Promise<Simulator> {
  const sim = await startSimulator({ jobSeconds: 1, jobJitterSeconds: 0.2, ...options });
  cleanups.push(() => sim.close());
  return sim;
}

const gatewayEnv = (sim: Simulator) => ({ GATEWAY_BASE_URL: sim.baseUrl, GATEWAY_API_KEY: sim.apiKey });
const FAST = ['--first-poll', '1', '--poll-interval', '0.3', '--no-adaptive-poll'];
const BUSY = /SQLITE_BUSY|database is locked|search attribute/i;

describe('commands in a folder with no server', () => {
  it('operator commands and run --detach say what to start, exit 2, and create nothing', async () => {
    const dir = await folder();
    const status = await vidbatch(['status', 'batch-0123456789abcdef'], { cwd: dir });
    expect(status.code).toBe(2);
    expect(status.stderr).toContain(
      'no vidbatch server is running here: start `vidbatch server` (or set TEMPORAL_ADDRESS)',
    );
    await writeVbenchCsv(join(dir, 'p.csv'), 2);
    const detached = await vidbatch(['run', 'p.csv', '--detach'], {
      cwd: dir,
      env: { GATEWAY_BASE_URL: 'http://127.0.0.1:9/v1', GATEWAY_API_KEY: 'sk-x' },
    });
    expect(detached.code).toBe(2);
    expect(detached.stderr).toContain('--detach needs a server that keeps running after this command');
    expect(detached.stderr).toContain('start `vidbatch server`');
    expect(existsSync(join(dir, '.vidbatch', 'temporal.db'))).toBe(false);
  });
});

describe('vidbatch server in the folder', () => {
  it('status and cancel from other processes reach a running batch through it', async () => {
    const dir = await folder();
    const sim = await simulator();
    const server = background(['server'], { cwd: dir });
    cleanups.push(() => server.stop());
    await server.waitFor(/Temporal gRPC address: (\S+)/);

    await writeVbenchCsv(join(dir, 'p.csv'), 30);
    const run = background(['run', 'p.csv', '--concurrency', '2', ...FAST], {
      cwd: dir,
      env: gatewayEnv(sim),
    });
    cleanups.push(() => run.stop());
    await run.waitFor(/Using the vidbatch dev server already running at/);
    const batchId = (await run.waitFor(/Started batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    await run.waitFor(/[1-9]\d*\/30 done/);

    const status = await vidbatch(['status', 'p.csv'], { cwd: dir });
    expect(status.stderr).not.toMatch(BUSY);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(`${batchId}: RUNNING`);

    const cancel = await vidbatch(['cancel', batchId], { cwd: dir });
    expect(cancel.stderr).not.toMatch(BUSY);
    expect(cancel.code).toBe(0);
    expect(cancel.stdout).toContain(`${batchId}: cancellation requested`);

    const ended = await run.done;
    expect(ended.stderr).toContain(`${batchId} was cancelled`);
    expect(ended.code).toBe(3);
    expect(sim.stats().jobsCreated).toBeLessThan(30);
    const after = await vidbatch(['status', batchId], { cwd: dir });
    expect(after.stdout).toContain(`${batchId}: CANCELLED`);
  });

  it('run --detach leaves a batch that `vidbatch worker` then runs to the end', async () => {
    const dir = await folder();
    const sim = await simulator();
    const server = background(['server'], { cwd: dir });
    cleanups.push(() => server.stop());
    await server.waitFor(/Temporal gRPC address/);

    await writeVbenchCsv(join(dir, 'p.csv'), 4);
    const detached = await vidbatch(['run', 'p.csv', '--detach', ...FAST], {
      cwd: dir,
      env: gatewayEnv(sim),
    });
    expect(detached.code).toBe(0);
    const batchId = /Started batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(detached.stderr)?.[1];
    expect(batchId).toBeDefined();
    expect(detached.stderr).toContain('makes progress only while workers run');
    expect(detached.stderr).toContain('`vidbatch worker`');
    expect(sim.stats().jobsCreated).toBe(0); // no worker ran in the detached command

    const worker = background(['worker'], { cwd: dir, env: gatewayEnv(sim) });
    cleanups.push(() => worker.stop());
    const watched = await vidbatch(['watch', batchId!], { cwd: dir });
    expect(watched.code).toBe(0);
    expect(watched.stdout).toContain(`${batchId}: 4 succeeded, 0 failed of 4`);
    expect(sim.stats().jobsCreated).toBe(4);
  });
});

describe('a run whose server goes away', () => {
  it('says so in one line, with how to go on, and exits 1', async () => {
    const dir = await folder();
    const sim = await simulator({ jobSeconds: 120 });
    const server = background(['server'], { cwd: dir });
    cleanups.push(() => server.stop());
    await server.waitFor(/Temporal gRPC address: (\S+)/);
    await writeVbenchCsv(join(dir, 'p.csv'), 3);
    const run = background(['run', 'p.csv', ...FAST], { cwd: dir, env: gatewayEnv(sim) });
    cleanups.push(() => run.stop());
    await run.waitFor(/Started batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/);
    await server.stop(); // Ctrl-C in the server's terminal

    const ended = await run.done;
    expect(ended.code, ended.stderr).toBe(1);
    expect(ended.stderr).toMatch(
      /The Temporal server this command used stopped answering \(.+\)\. batch-[0-9a-f]{16}-[0-9a-f]{8} is durable: once a server is up again/,
    );
    // The core's connection errors are in the log file; the terminal shows each at most once a minute.
    const connectLines = ended.stderr
      .split('\n')
      .filter((l) => /tcp connect error|Connection refused/i.test(l));
    expect(connectLines.length).toBeLessThanOrEqual(2);
    expect(ended.stderr).not.toMatch(/^\s+at /m); // no stack trace
  }, 180_000);
});

describe('vidbatch retry-failed on the embedded server', () => {
  it('runs a worker and follows the new batch like run: progress, summary, exit code', async () => {
    const dir = await folder();
    const sim = await simulator({ faults: { moderationWords: ['forbidden'] } });
    await writeFile(join(dir, 'p.csv'), 'id,prompt\nr1,a calm lake\nr2,a forbidden scene\nr3,a red kite\n');
    const first = await vidbatch(['run', 'p.csv', ...FAST], { cwd: dir, env: gatewayEnv(sim) });
    expect(first.code).toBe(3);
    expect(first.stdout).toMatch(/2 succeeded, 1 failed of 3/);

    sim.setFaults({ moderationWords: [] }); // the gateway now accepts it
    const retried = await vidbatch(['retry-failed', 'p.csv', '--code', 'content_moderation'], {
      cwd: dir,
      env: gatewayEnv(sim),
    });
    expect(retried.stderr).toMatch(/Started (batch-[0-9a-f]{16}-[0-9a-f]{8}): 1 failed rows of batch-/);
    expect(retried.stdout).toMatch(/batch-[0-9a-f]{16}-[0-9a-f]{8}: 1 succeeded, 0 failed of 1\. Manifest: /);
    expect(retried.code).toBe(0);
    expect(sim.stats().jobsCreated).toBe(4);
  });
});
