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
      GATEWAY_SUBMIT_TIMEOUT_MS: '2000',
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
  it('finishes the batch after a restart with no row lost, and every job billed twice reported on its row', async () => {
    // Hostile: the gateway ignores Idempotency-Key, so a submit cut by the kill may be billed twice.
    env = await testEnv({ jobSeconds: 1.2, jobJitterSeconds: 0.6, idempotency: false });
    const logs: string[] = [];
    const first = startWorkerProcess(env, logs);
    const csv = join(env.dir, 'crash.csv');
    const rows = await writeVbenchCsv(csv, 30, 'all_dimension', 700);
    const { handle, batchId } = await startBatch(env.session, csv, {
      concurrency: 8,
      poll: FAST_POLL,
      activityTimeoutMs: 3000,
      submitTimeoutMs: 4000,
      outDir: join(env.dir, 'out'),
    });
    await waitForProgress(handle, (p) => p.succeeded >= 8 && p.inFlight > 0, 90_000);
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    const submitsBeforeRestart = env.sim.stats().jobsCreated;
    expect(submitsBeforeRestart).toBeLessThan(30);
    startWorkerProcess(env, logs);

    const result = await handle.result();
    const manifest = await readManifest(result.manifestPath);
    expect(manifest.map((r) => r.rowId).sort()).toEqual(rows.map((r) => r[0]).sort());
    // A row fails only when its submits stayed unknown (resent once already): it says so.
    for (const r of manifest.filter((r) => r.status === 'failed'))
      expect(r).toMatchObject({ errorCode: 'submit_unknown', unknownSubmits: 2 });
    expect(result.succeeded + result.failed).toBe(30);

    // The honest bound: a row billed more than once is a row that reports unknown submit outcomes, and
    // never more extra jobs than the unknown outcomes it reports.
    const stats = env.sim.stats();
    const perRow = new Map<string, number>();
    for (const job of env.sim.state.jobs.values()) {
      const rowId = job.idempotencyKey?.split(':')[2];
      if (rowId) perRow.set(rowId, (perRow.get(rowId) ?? 0) + 1);
    }
    const unknownByRow = new Map(manifest.map((r) => [r.rowId, r.unknownSubmits ?? 0] as const));
    const billedTwice = [...perRow].filter(([, n]) => n > 1);
    for (const [rowId, jobs] of billedTwice)
      expect(unknownByRow.get(rowId), rowId).toBeGreaterThanOrEqual(jobs - 1);
    const flagged = manifest.filter((r) => (r.unknownSubmits ?? 0) > 0).length;
    expect(stats.idempotencyKeysWithMultipleJobs).toBeLessThanOrEqual(flagged);
    expect(Math.max(...perRow.values())).toBeLessThanOrEqual(2);
    // Succeeded rows carry distinct jobs.
    const succeeded = manifest.filter((r) => r.status === 'succeeded');
    expect(new Set(succeeded.map((r) => r.jobId)).size).toBe(succeeded.length);
    console.log(
      `worker crash: ${stats.jobsCreated} jobs for 30 rows; ${billedTwice.length} rows billed twice; ` +
        `${flagged} rows flagged with unknown submits; ${result.failed} failed submit_unknown`,
    );

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
