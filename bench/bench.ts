// `npm run bench`: vidbatch and a naive peer side by side, each against its own simulator with the same
// settings (rate limit, job latency, seed). Prints a table and, with --json, JSON.
// `npm run bench -- --scale`: 10,000 fast prompts without a rate limit (history size, RSS, throughput).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { Command, Option } from 'commander';
import { historyStats } from '../src/client/history-stats';
import { startSimulator, type SimulatorOptions } from '../src/simulator/server';
import { startBatch, type StartBatchOptions } from '../src/client/batches';
import type { Session } from '../src/client/session';
import { startDevServer } from '../src/dev-server/dev-server';
import { vbenchPrompts, writeVbenchCsv } from './vbench';
import { runNaivePeer } from './naive-peer';
import { clairvoyantMakespanMs } from './clairvoyant';

const CLI = fileURLToPath(new URL('../bin/vidbatch.mjs', import.meta.url));

const options = new Command('bench')
  .addOption(new Option('--prompts <n>', 'prompts').argParser(Number).default(300))
  .addOption(
    new Option('--rate-limit <rps>', 'gateway requests/second per key (0 = none)')
      .argParser(Number)
      .default(5),
  )
  .addOption(new Option('--job-seconds <s>', 'mean job latency').argParser(Number).default(60))
  .addOption(new Option('--job-jitter <s>', '± job latency').argParser(Number).default(20))
  .option(
    '--scale',
    '10,000 prompts, 1 s jobs, no rate limit, window 200, worker heap capped at 256 MB; no naive peer',
  )
  .addOption(
    new Option('--worker-heap <mb>', "the worker's --max-old-space-size (0: Node's default)").argParser(
      Number,
    ),
  )
  .addOption(new Option('--workers <n>', 'vidbatch worker processes').argParser(Number).default(1))
  .addOption(
    new Option('--batches <n>', 'concurrent batches splitting the prompts (shares printed)')
      .argParser(Number)
      .default(1),
  )
  .addOption(
    new Option('--max-running <c>', 'the gateway caps running jobs per key at C instead of requests/second')
      .argParser(Number)
      .default(0),
  )
  .addOption(
    new Option(
      '--temporal-address <host:port>',
      'run against this Temporal server (e.g. scripts/cluster.sh) instead of a fresh dev server',
    ),
  )
  .option('--no-peer', 'skip the naive peer')
  .option('--timeline', "print vidbatch's requests per 10 s (submits, status checks, 429s)")
  .option('--json', 'print JSON too')
  .parse(process.argv)
  .opts<{
    prompts: number;
    rateLimit: number;
    jobSeconds: number;
    jobJitter: number;
    scale?: boolean;
    peer: boolean;
    timeline?: boolean;
    workerHeap?: number;
    json?: boolean;
    workers: number;
    batches: number;
    maxRunning: number;
    temporalAddress?: string;
  }>();
if (options.maxRunning > 0) options.rateLimit = 0;

if (options.scale)
  Object.assign(options, {
    prompts: options.prompts === 300 ? 10_000 : options.prompts,
    rateLimit: 0,
    jobSeconds: 1,
    jobJitter: 0.5,
    peer: false,
    workerHeap: options.workerHeap ?? 256,
  });

/** The worker runs as its own process, so that its peak RSS is its own. */
function startWorker(
  env: Record<string, string>,
): Promise<{ pid: number; peakRssMb: () => number; stop: () => void }> {
  const heap = options.workerHeap ? [`--max-old-space-size=${options.workerHeap}`] : [];
  const child = spawn(process.execPath, [...heap, CLI, 'worker'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      if (err.includes('polling task queue')) {
        resolve({
          pid: child.pid!,
          peakRssMb: () =>
            Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024,
          stop: () => child.kill('SIGTERM'),
        });
      }
    });
    child.on('exit', (code) => reject(new Error(`worker exited ${code}: ${err}`)));
  });
}

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
// A server that outlives this run keeps earlier bench batches: other rows, so another batch id.
const rowOffset = options.temporalAddress ? Date.now() % 1_000_000_000 : 0;
const simVidbatch = await startSimulator({
  ...simSettings,
  recordRequests: Boolean(options.timeline) || options.batches > 1,
});
const simPeer = await startSimulator(simSettings);
// --batches N: the prompts split into N files (different content, so different batch ids).
const perBatch = Math.ceil(options.prompts / options.batches);
const csvs: string[] = [];
for (let b = 0; b < options.batches; b++) {
  const csv = join(dir, `bench-${b + 1}.csv`);
  await writeVbenchCsv(
    csv,
    Math.min(perBatch, options.prompts - b * perBatch),
    'all_dimension',
    rowOffset + b * perBatch,
  );
  csvs.push(csv);
}
const workers = await Promise.all(
  Array.from({ length: options.workers }, () =>
    startWorker({
      TEMPORAL_ADDRESS: server.address,
      VIDBATCH_TASK_QUEUE: 'bench',
      GATEWAY_BASE_URL: simVidbatch.baseUrl,
      GATEWAY_API_KEY: simVidbatch.apiKey,
      VIDBATCH_OUT_ROOT: join(dir, 'out'),
      VIDBATCH_INPUT_ROOT: dir,
    }),
  ),
);
const client = new Client({ connection: await Connection.connect({ address: server.address }) });
const session: Session = { client, taskQueue: 'bench', namespace: 'default', close: async () => {} };

const batchOptions: StartBatchOptions = {
  ...(options.scale
    ? { concurrency: 200, poll: { firstPollMs: 1000, intervalMs: 500, backoff: 1, capMs: 1000, jitter: 0.1 } }
    : {}), // vidbatch's defaults, not told the gateway's rate limit
};
const prompts = (await vbenchPrompts()).slice(0, Math.min(options.prompts, 946));
const peer = options.peer
  ? runNaivePeer({
      baseUrl: simPeer.baseUrl,
      apiKey: simPeer.apiKey,
      prompts: Array.from({ length: options.prompts }, (_, i) => prompts[i % prompts.length]!),
    })
  : undefined;
const started = Date.now();
const batches = await Promise.all(
  csvs.map(async (csv) => {
    const { handle, batchId } = await startBatch(session, csv, batchOptions);
    const result = await handle.result();
    return { batchId, result, finishedAt: Date.now() };
  }),
);
const makespanMs = Date.now() - started;
const { batchId } = batches[0]!;
const result = {
  succeeded: batches.reduce((n, b) => n + b.result.succeeded, 0),
  failed: batches.reduce((n, b) => n + b.result.failed, 0),
};
const peakRssMb = Math.max(...workers.map((w) => w.peakRssMb()));
const naive = await peer;
const history = await historyStats(client, batchId);

const stats = simVidbatch.stats();
// The old ideal: the rate limit forces 2 requests per prompt (submit + one status query), plus one job latency.
// With --max-running C: rows x mean latency / C.
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
// --batches: each batch's share of the submissions made while all batches ran (a job's Idempotency-Key names
// its batch; the simulator does not log status checks per job with a time, so those count per batch overall).
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
const requests = (s: typeof stats) =>
  Object.values(s.requests).reduce(
    (n, byStatus) => n + Object.values(byStatus).reduce((a, b) => a + b, 0),
    0,
  );
const report = {
  machine: { cores: (await import('node:os')).cpus().length, node: process.version },
  settings: { ...options, json: undefined },
  vidbatch: {
    makespanS: makespanMs / 1000,
    clairvoyantS: clairvoyantMs !== undefined ? clairvoyantMs / 1000 : null,
    ratioToClairvoyant: clairvoyantMs ? makespanMs / clairvoyantMs : null,
    boundS: boundMs ? boundMs / 1000 : null,
    ratioToBound: boundMs ? makespanMs / boundMs : null,
    succeeded: result.succeeded,
    failed: result.failed,
    rateLimitedPerJob: stats.rateLimited / Math.max(1, stats.jobsCreated),
    requestsPerPrompt: requests(stats) / options.prompts,
    historyEventsPerPrompt: history.eventsPerPrompt,
    largestRunEvents: history.largestRunEvents,
    actionsPerPrompt: history.actionsPerPrompt,
    workerPeakRssMb: peakRssMb,
    promptsPerSecond: options.prompts / (makespanMs / 1000),
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
};

const fmt = (v: number | null | undefined, digits = 2) =>
  v === null || v === undefined ? '-' : v.toFixed(digits);
const rows: [string, string, string][] = [
  ['makespan (s)', fmt(report.vidbatch.makespanS, 1), fmt(report.naivePeer?.makespanS, 1)],
  ['clairvoyant schedule (s)', fmt(report.vidbatch.clairvoyantS, 1), '-'],
  [
    'makespan / clairvoyant',
    fmt(report.vidbatch.ratioToClairvoyant),
    fmt(
      report.naivePeer && report.vidbatch.clairvoyantS
        ? report.naivePeer.makespanS / report.vidbatch.clairvoyantS
        : null,
    ),
  ],
  ['ideal bound (s)', fmt(report.vidbatch.boundS, 1), fmt(report.vidbatch.boundS, 1)],
  ['makespan / bound', fmt(report.vidbatch.ratioToBound), fmt(report.naivePeer?.ratioToBound)],
  [
    '429s per submitted job',
    fmt(report.vidbatch.rateLimitedPerJob, 3),
    fmt(report.naivePeer?.rateLimitedPerJob, 3),
  ],
  ['requests per prompt', fmt(report.vidbatch.requestsPerPrompt), fmt(report.naivePeer?.requestsPerPrompt)],
  ['history events per prompt', fmt(report.vidbatch.historyEventsPerPrompt, 1), '-'],
  ['largest run history (events)', String(report.vidbatch.largestRunEvents), '-'],
  ['billable actions per prompt (est.)', fmt(report.vidbatch.actionsPerPrompt, 1), '-'],
  ['worker peak RSS (MB)', fmt(report.vidbatch.workerPeakRssMb, 0), '-'],
  ['prompts per second', fmt(report.vidbatch.promptsPerSecond), '-'],
];
console.log(
  `\n${options.prompts} prompts, rate limit ${options.rateLimit || 'none'} rps${options.maxRunning ? `, at most ${options.maxRunning} running jobs` : ''}, jobs ${options.jobSeconds}±${options.jobJitter} s, ${options.workers} worker(s), ${options.batches} batch(es)\n`,
);
console.log(`${'metric'.padEnd(36)}${'vidbatch'.padStart(12)}${'naive peer'.padStart(12)}`);
for (const [name, a, b] of rows) console.log(`${name.padEnd(36)}${a.padStart(12)}${b.padStart(12)}`);
if (options.batches > 1) {
  console.log('\nbatch                                  done at (s)  submissions while all ran  requests');
  for (const b of shares)
    console.log(
      `${b.batchId.slice(0, 38).padEnd(38)} ${fmt(b.makespanS, 1).padStart(11)} ${fmt(b.submitShareWhileAllRan).padStart(26)} ${String(b.requests).padStart(9)}`,
    );
}
if (options.json) console.log(JSON.stringify({ ...report, batches: shares }, null, 2));
if (options.timeline) {
  // Where the rate budget went: a flat 50 requests per 10 s is a 5 rps limit used in full.
  const buckets = new Map<number, { submit: number; status: number; limited: number }>();
  for (const { at, route, status } of simVidbatch.state.requestLog) {
    const key = Math.floor((at - started) / 10_000);
    const b = buckets.get(key) ?? { submit: 0, status: 0, limited: 0 };
    if (status === 429) b.limited += 1;
    else if (route.startsWith('POST')) b.submit += 1;
    else b.status += 1;
    buckets.set(key, b);
  }
  console.log('\n  from    submits  status checks  429s');
  for (const [key, b] of [...buckets].sort((x, y) => x[0] - y[0]))
    console.log(
      `${String(key * 10).padStart(5)} s ${String(b.submit).padStart(9)} ${String(b.status).padStart(14)} ${String(b.limited).padStart(5)}`,
    );
}

for (const w of workers) w.stop();
await client.connection.close();
await simVidbatch.close();
await simPeer.close();
await server.stop();
