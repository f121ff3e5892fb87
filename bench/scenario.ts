// One bench scenario: a fresh Temporal dev server (or --temporal-address), a simulator for vidbatch and one
// for the naive peer with the same settings, vidbatch's workers as processes; returns the figures.
// `bench/bench.ts` prints one of these; `bench/targets.ts` runs the four in a row.
import { mkdtemp } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { historyStats } from '../src/client/history-stats';
import { startSimulator, type SimulatorOptions } from '../src/simulator/server';
import { startBatch, type StartBatchOptions } from '../src/client/batches';
import type { Session } from '../src/client/session';
import { startDevServer } from '../src/dev-server/dev-server';
import { vbenchPrompts, writeVbenchCsv } from './vbench';
import { runNaivePeer } from './naive-peer';
import { clairvoyantMakespanMs } from './clairvoyant';
import { lastSubmits, sampleQueueLimit, timelineRows, type LastSubmit, type TimelineRow } from './timeline';
import { startWorker } from './worker-process';
import { gatewayTarget } from '../src/config';

export interface ScenarioOptions {
  prompts: number;
  rateLimit: number;
  jobSeconds: number;
  jobJitter: number;
  scale?: boolean;
  peer: boolean;
  timeline?: boolean;
  workerHeap?: number;
  workers: number;
  batches: number;
  maxRunning: number;
  /** SIGKILL the first of `workers` (>= 2) this many seconds after the batch starts; no restart. */
  killWorkerAt?: number;
  temporalAddress?: string;
  /** The batch's window (--concurrency); default vidbatch's, or 200 with --scale. */
  concurrency?: number;
  /** Terminate the batch this many seconds after it starts and measure what it did by then. */
  stopAfter?: number;
}

export type ScenarioReport = Awaited<ReturnType<typeof measure>>;

const TASK_QUEUE = 'bench';

export async function runScenario(
  options: ScenarioOptions,
  log: (line: string) => void = (line) => console.error(line),
): Promise<ScenarioReport> {
  // Stopped in reverse order even when the run fails: no worker process outlives the bench.
  const cleanup: (() => Promise<unknown>)[] = [];
  try {
    return await measure(options, log, cleanup);
  } finally {
    for (const stop of cleanup.reverse()) await stop().catch(() => undefined);
  }
}

async function measure(
  options: ScenarioOptions,
  log: (line: string) => void,
  cleanup: (() => Promise<unknown>)[],
) {
  const dir = await mkdtemp(join(tmpdir(), 'vidbatch-bench-'));
  const simSettings: SimulatorOptions = {
    rateLimit: options.rateLimit,
    burst: options.rateLimit,
    maxRunningJobs: options.maxRunning,
    jobSeconds: options.jobSeconds,
    jobJitterSeconds: options.jobJitter,
    seed: 7,
  };
  const server = options.temporalAddress
    ? { address: options.temporalAddress, stop: async () => {} }
    : await startDevServer({ dbFile: ':memory:', headless: true, log: () => {} });
  cleanup.push(() => server.stop());
  // A server that outlives this run keeps earlier bench batches: other rows, so another batch id.
  const rowOffset = options.temporalAddress ? Date.now() % 1_000_000_000 : 0;
  const simVidbatch = await startSimulator({
    ...simSettings,
    recordRequests: Boolean(options.timeline) || options.batches > 1,
  });
  cleanup.push(() => simVidbatch.close());
  const simPeer = await startSimulator(simSettings);
  cleanup.push(() => simPeer.close());
  // --batches N: the prompts split into N files (different content, so different batch ids).
  const perBatch = Math.ceil(options.prompts / options.batches);
  const csvs: string[] = [];
  for (let b = 0; b < options.batches; b++) {
    const csv = join(dir, `bench-${b + 1}.csv`);
    const rows = Math.min(perBatch, options.prompts - b * perBatch);
    await writeVbenchCsv(csv, rows, 'all_dimension', rowOffset + b * perBatch);
    csvs.push(csv);
  }
  const workers = await Promise.all(
    Array.from({ length: options.workers }, () =>
      startWorker(
        {
          TEMPORAL_ADDRESS: server.address,
          VIDBATCH_TASK_QUEUE: TASK_QUEUE,
          GATEWAY_BASE_URL: simVidbatch.baseUrl,
          GATEWAY_API_KEY: simVidbatch.apiKey,
          VIDBATCH_OUT_ROOT: join(dir, 'out'),
          VIDBATCH_INPUT_ROOT: dir,
        },
        options.workerHeap,
      ),
    ),
  );
  cleanup.push(() => Promise.all(workers.map((w) => w.stop())));
  const client = new Client({ connection: await Connection.connect({ address: server.address }) });
  cleanup.push(() => client.connection.close());
  const session: Session = {
    client,
    taskQueue: TASK_QUEUE,
    namespace: 'default',
    target: gatewayTarget(simVidbatch.baseUrl),
    close: async () => {},
  };

  const batchOptions: StartBatchOptions = {
    ...(options.scale
      ? {
          concurrency: 200,
          poll: { firstPollMs: 1000, intervalMs: 500, backoff: 1, capMs: 1000, jitter: 0.1 },
        }
      : {}), // vidbatch's defaults, not told the gateway's rate limit
    ...(options.concurrency ? { concurrency: options.concurrency } : {}),
  };
  const prompts = (await vbenchPrompts()).slice(0, Math.min(options.prompts, 946));
  const peer = options.peer
    ? runNaivePeer({
        baseUrl: simPeer.baseUrl,
        apiKey: simPeer.apiKey,
        prompts: Array.from({ length: options.prompts }, (_, i) => prompts[i % prompts.length]!),
      })
    : undefined;
  const limits = options.timeline ? sampleQueueLimit(client, TASK_QUEUE) : undefined;
  const started = Date.now();
  // --kill-worker-at: the first worker dies as a crashed machine would; the others carry on.
  let killed: { pid: number; atS: number } | null = null;
  const killTimer =
    options.killWorkerAt !== undefined
      ? setTimeout(() => {
          const victim = workers[0]!;
          victim.kill();
          killed = { pid: victim.pid, atS: (Date.now() - started) / 1000 };
          log(
            `[bench] SIGKILLed worker pid ${victim.pid} at ${killed.atS.toFixed(1)} s; ${workers.length - 1} left`,
          );
        }, options.killWorkerAt * 1000)
      : undefined;
  cleanup.push(async () => {
    clearTimeout(killTimer);
    await limits?.stop();
  });
  // Once a minute: jobs made, worker and bench RSS (a rate or memory that drifts with the rows done shows here).
  let benchPeakRssMb = 0;
  const sampler = setInterval(() => {
    benchPeakRssMb = Math.max(benchPeakRssMb, process.memoryUsage().rss / 2 ** 20);
  }, 1000);
  let lastMinute = { atMs: started, jobs: 0 };
  const minutes = setInterval(() => {
    const now = Date.now();
    const jobs = simVidbatch.stats().jobsCreated;
    const rate = ((jobs - lastMinute.jobs) * 1000) / (now - lastMinute.atMs);
    lastMinute = { atMs: now, jobs };
    log(
      `[bench] ${Math.round((now - started) / 1000)} s: ${jobs} jobs made (${rate.toFixed(1)}/s in the last minute), ` +
        `worker peak RSS ${workers.map((w) => w.peakRssMb().toFixed(0)).join(', ')} MB, bench ${benchPeakRssMb.toFixed(0)} MB`,
    );
  }, 60_000);
  cleanup.push(() => {
    clearInterval(sampler);
    clearInterval(minutes);
    return Promise.resolve();
  });
  // --stop-after: the batch (and so its prompts) is terminated at that time and the figures are of what it did.
  let stopped = false;
  const batches = await Promise.all(
    csvs.map(async (csv) => {
      const { handle, batchId } = await startBatch(session, csv, batchOptions);
      const stop =
        options.stopAfter !== undefined
          ? setTimeout(
              () => {
                stopped = true;
                log(`[bench] --stop-after ${options.stopAfter}: terminating ${batchId}`);
                handle
                  .terminate('bench --stop-after')
                  .catch((err: unknown) => log(`[bench] could not terminate ${batchId}: ${String(err)}`));
              },
              options.stopAfter * 1000 - (Date.now() - started),
            )
          : undefined;
      const result = await handle.result().catch((err: unknown) => {
        if (!stopped) throw err;
        return { succeeded: 0, failed: 0 };
      });
      clearTimeout(stop);
      return { batchId, result, finishedAt: Date.now() };
    }),
  );
  const makespanMs = Date.now() - started;
  clearTimeout(killTimer);
  if (options.killWorkerAt !== undefined && !killed)
    log(`[bench] the batch finished before ${options.killWorkerAt} s: no worker was killed`);
  await limits?.stop();
  const { batchId } = batches[0]!;
  const result = {
    succeeded: batches.reduce((n, b) => n + b.result.succeeded, 0),
    failed: batches.reduce((n, b) => n + b.result.failed, 0),
  };
  const peakRssMb = Math.max(...workers.map((w) => w.peakRssMb()));
  clearInterval(minutes);
  const naive = await peer;
  const history = await historyStats(client, batchId);

  const stats = simVidbatch.stats();
  // The old ideal: the rate limit forces 2 requests per prompt (submit + one status query), plus one job
  // latency. With --max-running C: rows x mean latency / C (the reference for a running-jobs cap).
  const boundMs =
    options.maxRunning > 0
      ? ((options.prompts * options.jobSeconds) / options.maxRunning) * 1000
      : options.rateLimit > 0
        ? ((2 * options.prompts) / options.rateLimit + options.jobSeconds) * 1000
        : undefined;
  // The clairvoyant reference on the job latencies this run actually drew (docs/benchmarks.md).
  const jobs = [...simVidbatch.state.jobs.values()];
  const clairvoyantMs =
    options.maxRunning > 0
      ? undefined
      : clairvoyantMakespanMs(
          jobs.map((j) => j.doneAt - j.createdAt),
          options.rateLimit,
          options.rateLimit,
        );
  // --batches: each batch's share of the submissions made while all batches ran (a job's Idempotency-Key
  // names its batch; the simulator does not log status checks per job with a time, so those count per batch
  // overall).
  const bothUntil = Math.min(...batches.map((b) => b.finishedAt));
  const shares = batches.map((b) => {
    const mine = jobs.filter((j) => j.idempotencyKey?.startsWith(`vidbatch:${b.batchId}:`));
    const inWindow = mine.filter((j) => j.createdAt <= bothUntil).length;
    const all = jobs.filter((j) => j.createdAt <= bothUntil).length;
    const checks = mine.reduce((n, j) => n + (j.checks ?? 0), 0);
    return {
      batchId: b.batchId,
      makespanS: (b.finishedAt - started) / 1000,
      submitShareWhileAllRan: all ? inWindow / all : null,
      requests: mine.length + checks,
    };
  });
  // Requests to the gateway's API (the rate-limited /v1 routes); video downloads are counted apart.
  const countOf = (match: (route: string) => boolean) =>
    Object.entries(stats.requests)
      .filter(([route]) => match(route))
      .reduce((n, [, byStatus]) => n + Object.values(byStatus).reduce((a, b) => a + b, 0), 0);
  const requests = countOf((route) => route.includes(' /v1/'));
  const counted = stopped ? Math.max(1, stats.jobsCreated) : options.prompts;
  const downloads = countOf((route) => / \/(files|cdn)\//.test(route));
  const timeline: TimelineRow[] | null = options.timeline
    ? timelineRows(simVidbatch.state.requestLog, limits?.samples ?? [], started)
    : null;
  // The last jobs made and their rows' submits: what a slow run's tail waited for.
  const last: LastSubmit[] | null = options.timeline ? await lastSubmits(client, jobs, started) : null;

  return {
    machine: { cores: cpus().length, node: process.version },
    settings: { ...options },
    vidbatch: {
      makespanS: makespanMs / 1000,
      clairvoyantS: clairvoyantMs !== undefined ? clairvoyantMs / 1000 : null,
      ratioToClairvoyant: clairvoyantMs ? makespanMs / clairvoyantMs : null,
      boundS: boundMs ? boundMs / 1000 : null,
      ratioToBound: boundMs ? makespanMs / boundMs : null,
      succeeded: result.succeeded,
      failed: result.failed,
      jobsCreated: stats.jobsCreated,
      rateLimitedPerJob: stats.rateLimited / Math.max(1, stats.jobsCreated),
      requestsPerPrompt: requests / counted,
      downloadsPerPrompt: downloads / counted,
      historyEventsPerPrompt: history.eventsPerPrompt,
      /** The batch's share of the above (its runs' events over the prompts); the rest is the prompts' own. */
      batchEventsPerPrompt: history.batchEvents / Math.max(1, history.prompts),
      largestRunEvents: history.largestRunEvents,
      actionsPerPrompt: history.actionsPerPrompt,
      workerPeakRssMb: peakRssMb,
      /** Prompts whose job was made: all of them, unless --stop-after ended the batch first. */
      promptsStarted: stats.jobsCreated,
      promptsPerSecond: counted / (makespanMs / 1000),
      benchPeakRssMb,
      stoppedAfterS: stopped ? (options.stopAfter ?? null) : null,
      killedWorker: killed as { pid: number; atS: number } | null,
    },
    naivePeer: naive
      ? {
          makespanS: naive.makespanMs / 1000,
          ratioToBound: boundMs ? naive.makespanMs / boundMs : null,
          succeeded: naive.succeeded,
          rateLimitedPerJob: naive.rateLimited / options.prompts,
          requestsPerPrompt: naive.requests / options.prompts,
        }
      : null,
    batches: shares,
    timeline,
    lastSubmits: last,
  };
}
