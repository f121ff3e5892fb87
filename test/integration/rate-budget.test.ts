// One gateway budget across worker processes: two real `vidbatch worker` processes share a gateway limited to
// 3 requests/second; the learner workflow sets the gateway queue's server-side limit for both of them.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import { afterEach, describe, expect, inject, it } from 'vitest';
import {
  gatewayActivityOptions,
  gatewayQueue,
  rateBudgetQuery,
  rateBudgetWorkflowId,
} from '../../src/contract/rate-budget';
import { DEFAULT_MODEL, type PromptRow } from '../../src/contract/rows';
import { startSimulator, type Simulator } from '../../src/simulator/server';
import type { gatewayCalls } from '../fixtures/gateway-calls-workflow';

const CLI = fileURLToPath(new URL('../../bin/vidbatch.mjs', import.meta.url));
const { TaskQueueType, TaskQueueKind } = proto.temporal.api.enums.v1;

const children: ChildProcess[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const close of closers.splice(0).reverse()) await close();
});

function startWorkerProcess(env: NodeJS.ProcessEnv, logs: string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, [CLI, 'worker'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer) => {
      logs.push(d.toString());
      if (logs.join('').includes('polling task queue')) resolve(child);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`worker exited ${code}: ${logs.join('')}`)));
  });
}

const rows = (n: number): PromptRow[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `r${i + 1}`,
    line: i + 2,
    prompt: `a calm lake at dawn, take ${i + 1}`,
    model: DEFAULT_MODEL,
    input: { prompt: `a calm lake at dawn, take ${i + 1}` },
    parameters: {},
  }));

describe('gatewayActivityOptions', () => {
  it('puts gateway calls on the gateway queue with the batch as fairness key', () => {
    expect(
      gatewayActivityOptions({ taskQueue: 'vidbatch', batchId: 'batch-1', priority: 1, weight: 2 }),
    ).toEqual({
      taskQueue: 'vidbatch-gateway',
      allowEagerDispatch: false,
      priority: { fairnessKey: 'batch-1', fairnessWeight: 2, priorityKey: 1 },
    });
    const long = `batch-${'a'.repeat(64)}`;
    const key = gatewayActivityOptions({ taskQueue: 'q', batchId: long, priority: 3, weight: 1 }).priority
      .fairnessKey!;
    expect(key.length).toBeLessThanOrEqual(64);
    expect(key).not.toBe(
      gatewayActivityOptions({ taskQueue: 'q', batchId: `${long}b`, priority: 3, weight: 1 }).priority
        .fairnessKey,
    );
  });
});

describe('one rate budget across two worker processes', () => {
  it('learns a 3 rps gateway limit once, sets it on the gateway queue, and both workers stay under it', async () => {
    const address = inject('temporalAddress');
    const sim: Simulator = await startSimulator({
      rateLimit: 3,
      burst: 3,
      jobSeconds: 1.5,
      jobJitterSeconds: 0.5,
      recordRequests: true,
    });
    closers.push(() => sim.close());
    const connection = await Connection.connect({ address });
    closers.push(() => connection.close());
    const client = new Client({ connection });
    const taskQueue = `rate-${randomUUID()}`;
    const env = {
      ...process.env,
      TEMPORAL_ADDRESS: address,
      VIDBATCH_TASK_QUEUE: taskQueue,
      GATEWAY_BASE_URL: sim.baseUrl,
      GATEWAY_API_KEY: sim.apiKey,
      GATEWAY_TIMEOUT_MS: '5000',
    };
    const logs: string[] = [];
    await Promise.all([startWorkerProcess(env, logs), startWorkerProcess(env, logs)]);

    // The test's own workflow (a stand-in for the prompt workflow) runs on a queue of its own; its gateway
    // calls go to the gateway queue, which only the two worker processes poll.
    const nativeConnection = await NativeConnection.connect({ address });
    closers.push(() => nativeConnection.close());
    const callerQueue = `${taskQueue}-caller`;
    const caller = await Worker.create({
      connection: nativeConnection,
      taskQueue: callerQueue,
      workflowBundle: await bundleWorkflowCode({
        workflowsPath: fileURLToPath(new URL('../fixtures/gateway-calls-workflow.ts', import.meta.url)),
        logger: { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} },
      }),
    });
    const n = 45;
    const started = Date.now();
    const result = await caller.runUntil(
      client.workflow.execute<typeof gatewayCalls>('gatewayCalls', {
        taskQueue: callerQueue,
        workflowId: `calls-${taskQueue}`,
        args: [
          {
            taskQueue,
            batchId: 'batch-rate',
            priority: 3,
            weight: 1,
            rows: rows(n),
            poll: {
              firstPollMs: 1500,
              intervalMs: 500,
              backoff: 1.2,
              capMs: 2000,
              jitter: 0.1,
              adaptive: true,
            },
          },
        ],
      }),
    );
    const seconds = (Date.now() - started) / 1000;
    expect(result.succeeded).toBe(n);

    // The learner set the gateway queue's limit near the gateway's 3 rps.
    const described = await connection.workflowService.describeTaskQueue({
      namespace: 'default',
      taskQueue: { name: gatewayQueue(taskQueue), kind: TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
      taskQueueType: TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
      reportConfig: true,
    });
    const limit = described.config?.queueRateLimit?.rateLimit?.requestsPerSecond ?? 0;
    expect(described.config?.queueRateLimit?.metadata?.reason).toMatch(/^vidbatch:/);
    expect(limit).toBeGreaterThan(1.5);
    expect(limit).toBeLessThanOrEqual(4); // near 3: the learner probes a little above a ceiling it found
    const learner = await client.workflow
      .getHandle(rateBudgetWorkflowId(gatewayQueue(taskQueue)))
      .query(rateBudgetQuery);
    expect(learner.reports).toBeGreaterThan(0);

    // Both processes ran gateway calls (the identity on each activity start is its worker's).
    const history = await client.workflow.getHandle(`calls-${taskQueue}`).fetchHistory();
    const identities = new Set(
      (history.events ?? []).flatMap((e) =>
        e.activityTaskStartedEventAttributes ? [e.activityTaskStartedEventAttributes.identity] : [],
      ),
    );
    expect(identities.size).toBe(2);

    // Together they stayed near the limit: at most 3 rps plus the burst over any 10 s, and few 429s.
    const log = sim.state.requestLog;
    let busiest = 0;
    for (const { at } of log)
      busiest = Math.max(busiest, log.filter((r) => r.at >= at && r.at < at + 10_000).length);
    // The refusals count too: since learner v3 a short Retry-After cuts the limit without holding the queue, so
    // the slow start's overshoot (the first 429 is seen about 2 s after the limit that drew it) sends a few
    // more than the limit in one window (38 seen, 35 before v3); the 429 bound below keeps them few.
    expect(busiest).toBeLessThanOrEqual(3 * 10 + 3 + 10);
    const stats = sim.stats();
    expect(stats.jobsCreated).toBe(n);
    const perJob = stats.rateLimited / n;
    console.log(
      `two workers, 3 rps gateway: ${n} jobs in ${seconds.toFixed(1)} s, ${log.length} requests, busiest 10 s ${busiest}, 429s/job ${perJob.toFixed(3)}, queue limit ${limit}`,
    );
    if (process.env.DEBUG_TIMELINE) {
      const t0 = log[0]?.at ?? 0;
      const per: string[] = [];
      for (const r of log) {
        const i = Math.floor((r.at - t0) / 1000);
        per[i] = (per[i] ?? '') + (r.status === 429 ? 'X' : r.route.startsWith('POST') ? 's' : '.');
      }
      console.log(per.map((x, i) => `${i}: ${x ?? ''}`).join('\n'));
      const h = await client.workflow.getHandle(rateBudgetWorkflowId(gatewayQueue(taskQueue))).fetchHistory();
      console.log('EVENTS', h.events?.length);
      for (const e of h.events ?? [])
        if (e.activityTaskScheduledEventAttributes)
          console.log(
            'APPLY',
            Number(e.eventTime?.seconds) * 1000 + Math.round((e.eventTime?.nanos ?? 0) / 1e6) - t0,
            Buffer.from(e.activityTaskScheduledEventAttributes.input?.payloads?.[0]?.data ?? [])
              .toString()
              .slice(0, 120),
          );
    }
    // Learner v3 trades a few 429s for throughput: a short Retry-After cuts the limit without holding the
    // queue, and it settles at 0.95 of a confirmed ceiling. 45 short jobs make the slow start's first 429s
    // weigh a lot (0.2 seen; v2 0.09); the 300-job bench measures it (docs/benchmarks.md: 0.05-0.11).
    expect(perJob).toBeLessThanOrEqual(0.3);
  });
});
