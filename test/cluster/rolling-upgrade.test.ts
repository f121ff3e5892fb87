// A rolling upgrade with Worker Versioning on the self-hosted cluster (docs/upgrading.md#worker-versioning):
// workers of build A (this checkout) run a batch; workers of build B, a copy of this checkout with a workflow
// change that is deliberately not behind patched(), start and are made current; A's workers are stopped once
// no prompt pinned to A runs. The batch ends on B with every row once, no job paid twice, and not one failed
// workflow task in any of its histories: without versioning, B would replay A's prompts and fail them.
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { afterAll, describe, expect, it } from 'vitest';
import { writeVbenchCsv } from '../../bench/vbench';
import { gatewayQueue, rateBudgetWorkflowId } from '../../src/contract/rate-budget';
import { background, vidbatch } from '../integration/cli-helpers';
import { requireCluster, simulatorProcess } from './helpers';

const ADDRESS = requireCluster();
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ROWS = 60;
const { EVENT_TYPE_WORKFLOW_TASK_FAILED: WORKFLOW_TASK_FAILED } = proto.temporal.api.enums.v1.EventType;

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The prompt's steps after its submit: build B waits 1 ms first. Its history then has a timer where A's has
 * the state's search-attribute update, so a prompt A started that B replays fails its workflow task.
 */
const AFTER_SUBMIT = 'const failed = await this.submit();\n    if (failed) return failed;\n';

/** Build B: this checkout's sources (as they are now) with the change above, and its node_modules. */
async function buildB(base: string): Promise<string> {
  const dir = join(base, 'build-b');
  for (const part of ['src', 'bin', 'package.json', 'tsconfig.json'])
    await cp(join(ROOT, part), join(dir, part), { recursive: true });
  await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  const prompt = join(dir, 'src', 'workflows', 'prompt.ts');
  const code = await readFile(prompt, 'utf8');
  if (!code.includes(AFTER_SUBMIT)) throw new Error(`build B: ${prompt} no longer has ${AFTER_SUBMIT}`);
  await writeFile(prompt, code.replace(AFTER_SUBMIT, `${AFTER_SUBMIT}    await sleep(1);\n`));
  return join(dir, 'bin', 'vidbatch.mjs');
}

async function until(what: string, done: () => Promise<boolean>, timeoutMs = 300_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(500);
  }
}

describe.skipIf(!ADDRESS)('a rolling upgrade with Worker Versioning on the cluster', () => {
  it('finishes a batch on build B, A pinned prompts ended on A, no workflow task failed', async () => {
    const base = await mkdtemp(join(tmpdir(), 'vidbatch-upgrade-'));
    cleanups.push(() => rm(base, { recursive: true, force: true })); // last, once every process stopped
    const cliB = await buildB(base);
    const folders = { a: join(base, 'worker-a'), b: join(base, 'worker-b'), user: join(base, 'user') };
    const shared = { in: join(base, 'in'), out: join(base, 'out') };
    for (const d of [...Object.values(folders), ...Object.values(shared)])
      await mkdir(d, { recursive: true });
    const id = Date.now().toString(36);
    // A task queue and a deployment of its own: the other cluster tests' workers must not take these tasks.
    const temporal = { TEMPORAL_ADDRESS: ADDRESS!, VIDBATCH_TASK_QUEUE: `upgrade-${id}` };
    const deployment = `vidbatch-upgrade-${id}`;
    const connection = await Connection.connect({ address: ADDRESS! });
    cleanups.push(() => connection.close());
    const client = new Client({ connection });
    const count = async (query: string) => (await client.workflow.count(query)).count;

    const { baseUrl, apiKey, stats } = await simulatorProcess(
      ['--job-seconds', '4', '--job-jitter', '1', '--rate-limit', '20'],
      base,
      cleanups,
    );
    const workerEnv = (build: string) => ({
      ...temporal,
      GATEWAY_BASE_URL: baseUrl,
      GATEWAY_API_KEY: apiKey,
      VIDBATCH_INPUT_ROOT: shared.in,
      VIDBATCH_OUT_ROOT: shared.out,
      VIDBATCH_SHUTDOWN_GRACE_MS: '10000',
      VIDBATCH_DEPLOYMENT_NAME: deployment,
      VIDBATCH_BUILD_ID: build,
      VIDBATCH_MAKE_CURRENT: 'true',
    });
    const startWorker = async (build: 'a' | 'b', cli?: string) => {
      const w = background(['worker'], { cwd: folders[build], env: workerEnv(build), cli });
      cleanups.push(() => w.stop());
      await w.waitFor(/vidbatch worker: version \S+ is now current/, 240_000);
      return w;
    };

    const workerA = await startWorker('a');
    const csv = join(shared.in, 'prompts.csv');
    await writeVbenchCsv(csv, ROWS, 'all_dimension', Date.now() % 1_000_000_000);
    const started = await vidbatch(
      ['run', csv, '--detach', '--concurrency', '10', '--first-poll', '3', '--poll-interval', '1'],
      { cwd: folders.user, env: temporal },
    );
    expect(started.code, started.stderr).toBe(0);
    const batch = /Started batch (batch-[0-9a-f]{16}(?:-[0-9a-f]{8})?)/.exec(started.stderr)![1]!;
    await until('20 jobs made on build A', async () => (await stats()).jobsCreated >= 20);

    // B becomes current: new prompts start on B, the batch moves there at its next workflow task, and the
    // prompts A started stay pinned to A, which keeps running until the last of them ends.
    const workerB = await startWorker('b', cliB);
    const atSwitch = (await stats()).jobsCreated;
    const pinnedToA = (running: boolean) =>
      `TaskQueue = '${temporal.VIDBATCH_TASK_QUEUE}' AND TemporalWorkerDeploymentVersion = '${deployment}:a'` +
      ` AND TemporalWorkflowVersioningBehavior = 'Pinned'` +
      (running ? ` AND ExecutionStatus = 'Running'` : '');
    expect(await count(pinnedToA(true)), 'prompts pinned to A at the switch').toBeGreaterThan(0);
    await until('no prompt pinned to A running', async () => (await count(pinnedToA(true))) === 0);
    const stopped = await workerA.stop();
    expect(stopped.code, workerA.output()).toBe(0);

    const watched = await vidbatch(['watch', batch], { cwd: folders.user, env: temporal });
    expect(watched.code, watched.stdout + watched.stderr).toBe(0);
    expect(watched.stdout).toContain(`${batch}: ${ROWS} succeeded, 0 failed of ${ROWS}`);
    expect(workerB.output()).not.toMatch(/nondetermin/i);

    const lines = (await readFile(join(shared.out, batch, 'manifest.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean);
    const rows = lines.map((l) => (JSON.parse(l) as { rowId: string }).rowId);
    expect(new Set(rows).size).toBe(ROWS);
    expect(rows).toHaveLength(ROWS);
    const s = await stats();
    expect(Object.keys(s.idempotencyKeysBilledMoreThanOnce)).toEqual([]);
    expect(s.jobsCreated).toBe(ROWS);

    // Both builds ran prompts of the batch, and the batch itself ended on B.
    const onA = await count(`BatchId = '${batch}' AND ${pinnedToA(false)}`);
    const onB = await count(`BatchId = '${batch}' AND TemporalWorkerDeploymentVersion = '${deployment}:b'`);
    expect(onA).toBeGreaterThan(0);
    expect(onB).toBeGreaterThan(1);

    // Every history of the batch (each run of the batch, every prompt) and the queue's rate learner.
    const failedTasks: string[] = [];
    let histories = 0;
    const learner = rateBudgetWorkflowId(gatewayQueue(temporal.VIDBATCH_TASK_QUEUE));
    for await (const wf of client.workflow.list({
      query: `BatchId = '${batch}' OR WorkflowId = '${learner}'`,
    })) {
      histories += 1;
      const history = await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
      const failed = (history.events ?? []).filter((e) => e.eventType === WORKFLOW_TASK_FAILED);
      if (failed.length) failedTasks.push(`${wf.workflowId} (${wf.runId}): ${failed.length}`);
    }
    expect(failedTasks, 'histories with a failed workflow task').toEqual([]);
    expect(histories).toBeGreaterThan(ROWS);

    console.log(
      `[upgrade] ${atSwitch} jobs made before build B became current; ${onA} prompts ended on A, ` +
        `${onB} workflows on B; ${histories} histories without a failed workflow task`,
    );
  }, 600_000);
});
