// Over 400 lines: one probe of the server's rate limiting, each experiment a short function on one harness.
// Measures how the Temporal server's task-queue rate limit and fairness behave, before vidbatch
// relies on them. Each experiment uses fresh task queues, schedules at most ~300 activities, runs for
// seconds, and prints when the server dispatched each activity (as seen by the activity itself).
//
//   TEMPORAL_ADDRESS=127.0.0.1:7233 npx tsx bench/queue-limit-probe.ts [experiment...]
//   experiments: api rates change partitions retries fairness eager (eager needs
//   system.enableActivityEagerExecution=true on the server); set <queue> <rps>; show <queue>
// Findings: docs/rate-budget.md.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { Client, Connection } from '@temporalio/client';
import type { Priority } from '@temporalio/common';
import proto from '@temporalio/proto';
import {
  bundleWorkflowCode,
  NativeConnection,
  Runtime,
  Worker,
  type WorkflowBundle,
} from '@temporalio/worker';
import type { BurstInput } from './queue-limit-probe-workflows';

const { temporal } = proto;
const ACTIVITY = temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY;
const address = process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
const namespace = process.env.TEMPORAL_NAMESPACE ?? 'default';
const identity = 'queue-limit-probe';

interface Start {
  label: string;
  index: number;
  attempt: number;
  worker: string;
  at: number;
}
const starts: Start[] = [];
// In a child worker process (`worker` subcommand) starts go to stdout for the parent to collect.
let report = (start: Start) => void starts.push(start);

/** Activities for one worker: `record` notes when it was dispatched, and fails `failures` times first. */
export function createActivities(worker: string) {
  return {
    // eslint-disable-next-line @typescript-eslint/require-await
    async record(label: string, index: number, failures: number): Promise<void> {
      const { attempt } = Context.current().info;
      report({ label, index, attempt, worker, at: Date.now() });
      if (attempt <= failures) {
        throw ApplicationFailure.create({ message: 'probe failure', nextRetryDelay: '100ms' });
      }
    },
  };
}
export type ProbeActivities = ReturnType<typeof createActivities>;

let client: Client;
let nativeConnection: NativeConnection;
let bundle: WorkflowBundle;
const run = `${Date.now().toString(36)}`;
const queueName = (name: string) => `probe-${name}-${run}`;

// --- the API calls under test ---------------------------------------------------------------------------

/** Sets (rps = number) or removes (rps = null) the whole-queue limit of an activity task queue. */
async function setQueueLimit(taskQueue: string, rps: number | null, reason = 'probe') {
  await updateLimit(taskQueue, 'updateQueueRateLimit', rps, reason);
}

/** The same for the default limit of each fairness key (scaled by its weight). */
async function setFairnessKeyLimit(taskQueue: string, rps: number | null, reason = 'probe') {
  await updateLimit(taskQueue, 'updateFairnessKeyRateLimitDefault', rps, reason);
}

async function updateLimit(
  taskQueue: string,
  which: 'updateQueueRateLimit' | 'updateFairnessKeyRateLimitDefault',
  rps: number | null,
  reason: string,
) {
  await client.workflowService.updateTaskQueueConfig({
    namespace,
    identity,
    taskQueue,
    taskQueueType: ACTIVITY,
    // An update without rateLimit removes the limit.
    [which]: rps === null ? { reason } : { rateLimit: { requestsPerSecond: rps }, reason },
  });
}

async function describeQueue(taskQueue: string) {
  const res = await client.workflowService.describeTaskQueue({
    namespace,
    taskQueue: { name: taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: ACTIVITY,
    reportConfig: true,
  });
  const partitions = await client.workflowService.listTaskQueuePartitions({
    namespace,
    taskQueue: { name: taskQueue },
  });
  return {
    queueRateLimit: res.config?.queueRateLimit?.rateLimit?.requestsPerSecond ?? null,
    queueRateLimitReason: res.config?.queueRateLimit?.metadata?.reason ?? null,
    fairnessKeyRateLimit: res.config?.fairnessKeysRateLimitDefault?.rateLimit?.requestsPerSecond ?? null,
    effective: res.effectiveRateLimit?.requestsPerSecond ?? null,
    effectiveSource: temporal.api.enums.v1.RateLimitSource[res.effectiveRateLimit?.rateLimitSource ?? 0],
    activityPartitions: partitions.activityTaskQueuePartitions?.length ?? 0,
    workflowPartitions: partitions.workflowTaskQueuePartitions?.length ?? 0,
  };
}

// --- harness --------------------------------------------------------------------------------------------

async function activityWorker(taskQueue: string, name: string, polls?: number) {
  const worker = await Worker.create({
    connection: nativeConnection,
    namespace,
    taskQueue,
    identity: name,
    activities: createActivities(name),
    maxConcurrentActivityTaskExecutions: 300,
    ...(polls === undefined ? {} : { maxConcurrentActivityTaskPolls: polls }),
  });
  const running = worker.run();
  return {
    async stop() {
      worker.shutdown();
      await running;
    },
  };
}

/** An activity worker in its own process: one process may not run two workers on the same queue. */
async function childWorker(taskQueue: string, name: string) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), 'worker', taskQueue, name],
    {
      env: { ...process.env, TEMPORAL_ADDRESS: address },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = once(child, 'exit');
  const lines = createInterface({ input: child.stdout });
  let ready: () => void = () => undefined;
  const isReady = new Promise<void>((resolve) => (ready = resolve));
  lines.on('line', (line) => {
    if (line === 'READY') ready();
    else if (line.startsWith('START ')) starts.push(JSON.parse(line.slice(6)) as Start);
  });
  await Promise.race([isReady, exited.then(() => Promise.reject(new Error(`worker ${name} exited early`)))]);
  return {
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function withWorkers<T>(
  workers: (() => Promise<{ stop(): Promise<void> }>)[],
  fn: () => Promise<T>,
): Promise<T> {
  const started: { stop(): Promise<void> }[] = [];
  try {
    // One after another, so a failing one leaves no stray worker behind.
    for (const create of workers) started.push(await create());
    return await fn();
  } finally {
    await Promise.all(started.map((w) => w.stop()));
  }
}

const wfQueue = () => queueName('wf');

async function startBurst(input: BurstInput, taskQueue = wfQueue()) {
  return client.workflow.start('burst', {
    taskQueue,
    workflowId: `${input.label}-${run}-${Math.random().toString(36).slice(2, 8)}`,
    args: [input],
    workflowExecutionTimeout: '3m',
  });
}

function at(label?: string) {
  return starts.filter((s) => label === undefined || s.label === label).map((s) => s.at);
}

/** Per-second dispatch counts from `t0`, the rate after the first 2 s, and the burst in the first second. */
function summarise(times: number[], t0 = Math.min(...times)) {
  const sorted = [...times].sort((a, b) => a - b);
  const first = sorted[0] ?? t0;
  const last = sorted.at(-1) ?? t0;
  const perSecond: number[] = [];
  for (const t of sorted) {
    const i = Math.floor((t - t0) / 1000);
    while (perSecond.length <= i) perSecond.push(0);
    perSecond[i] = (perSecond[i] ?? 0) + 1;
  }
  const steady = sorted.filter((t) => t >= first + 2000);
  const steadyRate =
    steady.length > 1 ? ((steady.length - 1) * 1000) / ((steady.at(-1) ?? 0) - (steady[0] ?? 0)) : NaN;
  // Until 80% have started every partition still has a backlog; the tail drains partition by partition.
  const bulk = sorted.slice(0, Math.ceil(sorted.length * 0.8)).filter((t) => t >= first + 2000);
  const bulkRate = bulk.length > 1 ? ((bulk.length - 1) * 1000) / ((bulk.at(-1) ?? 0) - (bulk[0] ?? 0)) : NaN;
  return {
    n: sorted.length,
    bulkRps: bulkRate.toFixed(2),
    spanS: ((last - first) / 1000).toFixed(1),
    firstSecond: sorted.filter((t) => t < first + 1000).length,
    steadyRps: steadyRate.toFixed(2),
    overallRps: (((sorted.length - 1) * 1000) / (last - first || 1)).toFixed(2),
    perSecond: perSecond.join(' '),
  };
}

/** PROBE_ONLY=substring runs only the matching cases of an experiment. */
const selected = (name: string) => !process.env.PROBE_ONLY || name.includes(process.env.PROBE_ONLY);

function log(name: string, value: unknown) {
  console.log(`${name}: ${typeof value === 'string' ? value : JSON.stringify(value)}`);
}

// --- experiments ----------------------------------------------------------------------------------------

const experiments: Record<string, () => Promise<void>> = {
  /** Request shape, read-back, partitions. */
  async api() {
    const q = queueName('api');
    log('api.before', await describeQueue(q));
    await setQueueLimit(q, 5, 'probe: 5 rps');
    log('api.after-set-5', await describeQueue(q));
    await setFairnessKeyLimit(q, 2);
    log('api.after-fairness-key-2', await describeQueue(q));
    await setQueueLimit(q, null);
    await setFairnessKeyLimit(q, null);
    log('api.after-unset', await describeQueue(q));
  },

  /** Observed dispatch rate vs configured; burst after the queue sat idle with the limit set. */
  async rates() {
    const rates = process.env.PROBE_RATES?.split(',').map(Number) ?? [2, 5, 10];
    for (const rps of rates) {
      const q = queueName(`rate${rps}`);
      await setQueueLimit(q, rps);
      await withWorkers([() => activityWorker(q, 'w1')], async () => {
        await sleep(3000); // idle with pollers waiting: the buckets fill
        const label = `rate${rps}`;
        const h = await startBurst({ label, count: Math.min(300, rps * 22 + 10), activityQueue: q });
        await h.result();
        log(`rates.${rps}rps`, summarise(at(label)));
      });
    }
  },

  /** How fast a change takes effect: 2 rps, then 10 rps, then 0 (pause), then no limit. */
  async change() {
    const q = queueName('change');
    await setQueueLimit(q, 2);
    await withWorkers([() => activityWorker(q, 'w1')], async () => {
      const h = await startBurst({ label: 'change', count: 200, activityQueue: q });
      const t0 = Date.now();
      await sleep(8000);
      const set10 = Date.now() - t0;
      await setQueueLimit(q, 10);
      await sleep(6000);
      const set0 = Date.now() - t0;
      await setQueueLimit(q, 0);
      await sleep(5000);
      const unset = Date.now() - t0;
      await setQueueLimit(q, null);
      const marks = { set10, set0, unset };
      await h.result();
      log('change.marks-ms', marks);
      const rel = at('change').map((t) => t - t0);
      // When did the rate follow each change? First dispatch gaps around each mark.
      const after = (ms: number) => rel.filter((t) => t >= ms).slice(0, 6);
      log('change.first-after-set10', after(marks.set10));
      log('change.last-before-set0+1s', rel.filter((t) => t < marks.set0 + 1000).slice(-4));
      log('change.first-after-set0', after(marks.set0).slice(0, 3));
      log('change.first-after-unset', after(marks.unset).slice(0, 3));
      log('change.per-second', summarise(at('change'), t0).perSecond);
    });
  },

  /** Is the limit per partition or per queue: one poller vs three workers. */
  async partitions() {
    for (const setup of ['1 worker, 1 poller', '1 worker, default pollers', '3 workers'] as const) {
      if (!selected(setup)) continue;
      const q = queueName(`part${setup.length}`);
      await setQueueLimit(q, 8);
      const workers =
        setup === '3 workers'
          ? [() => activityWorker(q, 'a'), () => childWorker(q, 'b'), () => childWorker(q, 'c')]
          : [() => activityWorker(q, 'a', setup === '1 worker, 1 poller' ? 1 : undefined)];
      await withWorkers(workers, async () => {
        await sleep(3000);
        const label = `part-${setup}`;
        const h = await startBurst({ label, count: 170, activityQueue: q });
        await h.result();
        log(`partitions.${setup}`, {
          ...summarise(at(label)),
          partitions: (await describeQueue(q)).activityPartitions,
        });
        const byWorker: Record<string, number> = {};
        for (const s of starts.filter((x) => x.label === label))
          byWorker[s.worker] = (byWorker[s.worker] ?? 0) + 1;
        log(`partitions.${setup}.by-worker`, byWorker);
      });
    }
  },

  /** Do retry attempts consume the limit? 30 activities x 3 attempts at 5 rps. */
  async retries() {
    const q = queueName('retry');
    await setQueueLimit(q, 5);
    await withWorkers([() => activityWorker(q, 'w1')], async () => {
      await sleep(3000);
      const h = await startBurst({ label: 'retry', count: 30, activityQueue: q, failures: 2 });
      await h.result();
      const all = starts.filter((s) => s.label === 'retry');
      log('retries.all-attempts', summarise(all.map((s) => s.at)));
      log('retries.attempts', {
        1: all.filter((s) => s.attempt === 1).length,
        2: all.filter((s) => s.attempt === 2).length,
        3: all.filter((s) => s.attempt === 3).length,
      });
    });
  },

  /** Two batches at once: equal weights, weights 1:3, a later priority-1 batch, a per-key limit. */
  async fairness() {
    const cases: {
      name: string;
      a: Priority;
      b: Priority;
      countB: number;
      delayB: number;
      keyLimit?: number;
    }[] = [
      { name: 'equal', a: { fairnessKey: 'a' }, b: { fairnessKey: 'b' }, countB: 120, delayB: 0 },
      {
        name: 'weights-1-3',
        a: { fairnessKey: 'a' },
        b: { fairnessKey: 'b', fairnessWeight: 3 },
        countB: 120,
        delayB: 0,
      },
      {
        name: 'b-later-priority-1',
        a: { fairnessKey: 'a', priorityKey: 3 },
        b: { fairnessKey: 'b', priorityKey: 1 },
        countB: 40,
        delayB: 4000,
      },
      {
        name: 'b-later-same-priority',
        a: { fairnessKey: 'a' },
        b: { fairnessKey: 'b' },
        countB: 40,
        delayB: 4000,
      },
      {
        name: 'key-limit-3',
        a: { fairnessKey: 'a' },
        b: { fairnessKey: 'b' },
        countB: 60,
        delayB: 0,
        keyLimit: 3,
      },
    ];
    for (const c of cases) {
      if (!selected(c.name)) continue;
      const q = queueName(`fair-${c.name}`);
      await setQueueLimit(q, 10);
      if (c.keyLimit !== undefined) await setFairnessKeyLimit(q, c.keyLimit);
      await withWorkers([() => activityWorker(q, 'w1')], async () => {
        await sleep(3000);
        const la = `${c.name}-a`;
        const lb = `${c.name}-b`;
        const t0 = Date.now();
        const ha = await startBurst({
          label: la,
          count: c.keyLimit ? 60 : 120,
          activityQueue: q,
          priority: c.a,
        });
        if (c.delayB) await sleep(c.delayB);
        const tb = Date.now();
        const hb = await startBurst({ label: lb, count: c.countB, activityQueue: q, priority: c.b });
        await Promise.all([ha.result(), hb.result()]);
        const a = at(la);
        const b = at(lb);
        // Shares while both batches still had a backlog: from B's start until either had started 80% of
        // its activities (the tail after that drains partition by partition).
        const p80 = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length * 0.8)] ?? 0;
        const end = Math.min(p80(a), p80(b));
        const inA = a.filter((t) => t >= tb && t <= end).length;
        const inB = b.filter((t) => t >= tb && t <= end).length;
        log(`fairness.${c.name}`, {
          windowS: ((end - tb) / 1000).toFixed(1),
          shareA: (inA / (inA + inB)).toFixed(2),
          shareB: (inB / (inA + inB)).toFixed(2),
          a: summarise(a, t0),
          b: summarise(b, t0),
        });
      });
    }
  },

  /** Eager dispatch: activities on the workflow's own queue, limited to 1 rps, sequential, eager on/off. */
  async eager() {
    const q = queueName('eager');
    await setQueueLimit(q, 1);
    const worker = await Worker.create({
      connection: nativeConnection,
      namespace,
      taskQueue: q,
      workflowBundle: bundle,
      activities: createActivities('combined'),
    });
    await worker.runUntil(async () => {
      await sleep(2000);
      for (const allowEagerDispatch of [true, false]) {
        const label = `eager-${allowEagerDispatch}`;
        const t0 = Date.now();
        const h = await startBurst(
          { label, count: 10, activityQueue: q, sequential: true, allowEagerDispatch },
          q,
        );
        await h.result();
        log(`eager.allowEagerDispatch=${allowEagerDispatch}`, {
          tookS: ((Date.now() - t0) / 1000).toFixed(1),
          ...summarise(at(label)),
        });
      }
      const p = `eager-parallel`;
      const h = await startBurst({ label: p, count: 20, activityQueue: q }, q);
      await h.result();
      log('eager.parallel-20-allowEager', summarise(at(p)));
    });
  },
};

async function main() {
  const args = process.argv.slice(2);
  Runtime.install({
    logger: {
      log: () => undefined,
      trace: () => undefined,
      debug: () => undefined,
      info: () => undefined,
      warn: (m) => console.warn(m),
      error: (m) => console.error(m),
    },
  });
  const connection = await Connection.connect({ address });
  client = new Client({ connection, namespace });
  try {
    if (args[0] === 'set') {
      const rps = args[2] === 'none' ? null : Number(args[2]);
      await setQueueLimit(args[1] ?? '', rps);
      log('set', await describeQueue(args[1] ?? ''));
      return;
    }
    if (args[0] === 'worker') {
      report = (start) => void process.stdout.write(`START ${JSON.stringify(start)}\n`);
      nativeConnection = await NativeConnection.connect({ address });
      const worker = await activityWorker(args[1] ?? '', args[2] ?? 'child');
      process.stdout.write('READY\n');
      await once(process, 'SIGTERM');
      await worker.stop();
      process.exit(0); // the child's job is done; skip closing connections a finished worker may still pin
    }
    if (args[0] === 'show') {
      log('show', await describeQueue(args[1] ?? ''));
      return;
    }
    const names = args.length > 0 ? args : ['api', 'rates', 'change', 'partitions', 'retries', 'fairness'];
    nativeConnection = await NativeConnection.connect({ address });
    bundle = await bundleWorkflowCode({
      workflowsPath: fileURLToPath(new URL('./queue-limit-probe-workflows.ts', import.meta.url)),
      logger: Runtime.instance().logger,
    });
    const wfWorker = await Worker.create({
      connection: nativeConnection,
      namespace,
      taskQueue: wfQueue(),
      workflowBundle: bundle,
    });
    await wfWorker.runUntil(async () => {
      for (const name of names) {
        const experiment = experiments[name];
        if (!experiment) throw new Error(`unknown experiment ${name}`);
        const t = Date.now();
        await experiment();
        console.log(`-- ${name} took ${((Date.now() - t) / 1000).toFixed(0)} s`);
      }
    });
  } finally {
    await nativeConnection?.close();
    await connection.close();
  }
}

await main();
