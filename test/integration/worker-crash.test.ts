import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { readManifest } from '../../src/results/manifest';
import { startBatch } from '../../src/client/batches';
import { writeVbenchCsv } from '../../bench/vbench';
import { cliEnv, FAST_POLL, testEnv, waitForProgress, type TestEnv } from './helpers';

const CLI = fileURLToPath(new URL('../../bin/vidbatch.mjs', import.meta.url));

let env: TestEnv | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children) c.kill('SIGKILL');
  await env?.close();
  env = undefined;
});

function startWorkerProcess(e: TestEnv, logs: string[]): ChildProcess {
  const child = spawn(process.execPath, [CLI, 'worker'], {
    env: cliEnv(e, {
      GATEWAY_TIMEOUT_MS: '2000',
      VIDBATCH_OUT_ROOT: join(e.dir, 'out'),
      VIDBATCH_LOG_LEVEL: 'INFO',
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (d: Buffer) => logs.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => logs.push(d.toString()));
  children.push(child);
  return child;
}

describe('a worker killed with SIGKILL mid-batch', () => {
  it('finishes the batch after a restart with no row lost and no job submitted twice', async () => {
    env = await testEnv({ jobSeconds: 1.2, jobJitterSeconds: 0.6 });
    const logs: string[] = [];
    const first = startWorkerProcess(env, logs);
    const csv = join(env.dir, 'crash.csv');
    const rows = await writeVbenchCsv(csv, 30, 'all_dimension', 700);
    const { handle, batchId } = await startBatch(env.session, csv, {
      concurrency: 8,
      poll: FAST_POLL,
      activityTimeoutMs: 3000,
      outDir: join(env.dir, 'out'),
    });
    await waitForProgress(handle, (p) => p.succeeded >= 8 && p.inFlight > 0, 90_000);
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    const submitsBeforeRestart = env.sim.stats().jobsCreated;
    expect(submitsBeforeRestart).toBeLessThan(30);
    startWorkerProcess(env, logs);

    const result = await handle.result();
    expect(result).toMatchObject({ total: 30, succeeded: 30, failed: 0 });
    const manifest = await readManifest(result.manifestPath);
    expect(manifest.map((r) => r.rowId).sort()).toEqual(rows.map((r) => r[0]).sort());
    expect(new Set(manifest.map((r) => r.jobId)).size).toBe(30);

    const stats = env.sim.stats();
    expect(stats.jobsCreated).toBe(30);
    expect(stats.bodiesWithMultipleJobs).toBe(0);
    // Submits that reached the gateway twice could only be in-flight ones at the kill, answered by idempotency.
    const submits = stats.requests['POST /v1/videos/generations']?.[200] ?? 0;
    expect(submits - stats.idempotentReplays).toBe(30);

    // The key is in neither the worker's logs nor any workflow history.
    expect(logs.join('')).not.toContain(env.sim.apiKey);
    const histories: string[] = [];
    for await (const wf of env.client.workflow.list({ query: `BatchId = '${batchId}'` })) {
      histories.push(
        JSON.stringify(await env.client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory()),
      );
    }
    expect(histories.length).toBeGreaterThanOrEqual(31);
    for (const h of histories) expect(h).not.toContain(env.sim.apiKey);
  });
});
