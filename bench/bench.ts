// `npm run bench`: vidbatch and a naive peer side by side, each against its own simulator with the same
// settings (rate limit, job latency, seed). Prints a table and, with --json, JSON.
// `npm run bench -- --scale`: 10,000 fast prompts without a rate limit (history size, RSS, throughput).
// `npm run bench -- --targets`: the four target scenarios one after another, one table (targets.ts).
// `npm run bench -- --repeat N`: the scenario N times in a row, a line each, then the median and worst (repeat.ts).
import { Command, Option } from 'commander';
import { runScenario, type ScenarioOptions, type ScenarioReport } from './scenario';
import { printRunLines, runLine, summarize } from './repeat';
import { printLastSubmits, printTimeline } from './timeline';
import { runTargets, SCENARIO_FLAGS } from './targets';

const program = new Command('bench')
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
    new Option('--concurrency <n>', "the batch's window (default vidbatch's; 200 with --scale)").argParser(
      Number,
    ),
  )
  .addOption(
    new Option(
      '--kill-worker-at <s>',
      'SIGKILL one worker (of --workers >= 2) this many seconds after the batch starts; no restart',
    ).argParser(Number),
  )
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
  .addOption(
    new Option(
      '--stop-after <s>',
      'terminate the batch this many seconds after it starts; the figures are of what it did by then (a 100,000-row run in a session)',
    ).argParser(Number),
  )
  .option('--targets', 'run the four target scenarios one after another and print one table')
  .addOption(
    new Option(
      '--scale-down <n>',
      'with --targets: divide prompts, job latencies, the kill time and the running cap by N (a quick smoke run; the targets do not apply)',
    ).argParser(Number),
  )
  .addOption(
    new Option(
      '--repeat <n>',
      'run the scenario N times, each on a fresh server: a line per run, then the median and the worst',
    )
      .argParser(Number)
      .default(1),
  )
  .option('--no-peer', 'skip the naive peer')
  .option(
    '--timeline',
    "print vidbatch's requests per 10 s (submits, status checks, 429s), the gateway queue's limit, and the last jobs' submits",
  )
  .option('--json', 'print JSON too')
  .parse(process.argv);
const options = program.opts<
  ScenarioOptions & { json?: boolean; targets?: boolean; scaleDown?: number; repeat: number }
>();

function usage(message: string): never {
  console.error(`bench: ${message}`);
  process.exit(2);
}
const passed = (name: string) => program.getOptionValueSource(name) === 'cli';
if (!(Number.isInteger(options.repeat) && options.repeat >= 1))
  usage(`--repeat must be a whole number >= 1 (got ${options.repeat})`);
if (options.targets) {
  if (options.repeat > 1) usage('--repeat applies to one scenario, not --targets');
  const clash = SCENARIO_FLAGS.filter(passed);
  if (clash.length)
    usage(
      `--targets sets each scenario itself; drop ${clash.map((k) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`).join(', ')}`,
    );
  if (options.scaleDown !== undefined && !(options.scaleDown >= 1))
    usage(`--scale-down must be a number >= 1 (got ${options.scaleDown})`);
  await runTargets({
    peer: options.peer,
    timeline: Boolean(options.timeline),
    json: Boolean(options.json),
    scaleDown: options.scaleDown ?? 1,
    temporalAddress: options.temporalAddress,
  });
  process.exit(0);
}
if (options.scaleDown !== undefined) usage('--scale-down applies to --targets only');
if (options.killWorkerAt !== undefined) {
  if (!(options.killWorkerAt > 0)) usage(`--kill-worker-at must be a number of seconds > 0`);
  if (!(options.workers >= 2))
    usage(`--kill-worker-at needs --workers 2 or more (one must be left; got ${options.workers})`);
}
if (options.stopAfter !== undefined && !(options.stopAfter > 0))
  usage(`--stop-after must be a number of seconds > 0 (got ${options.stopAfter})`);
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

const { json, repeat, ...scenario } = options;
if (repeat > 1) {
  const reports: ScenarioReport[] = [];
  for (let i = 1; i <= repeat; i++) {
    console.error(`[bench] run ${i}/${repeat}`);
    const report = await runScenario(scenario);
    reports.push(report);
    console.log(`\nrun ${i}/${repeat}`);
    printRunLines([runLine(i, report)]);
    printDetails(report);
  }
  const lines = reports.map((r, i) => runLine(i + 1, r));
  const [median, worst] = summarize(lines);
  const s = reports[0]!.settings;
  console.log(
    `\n${repeat} runs of ${s.prompts} prompts, rate limit ${s.rateLimit || 'none'} rps${s.maxRunning ? `, at most ${s.maxRunning} running jobs` : ''}, jobs ${s.jobSeconds}±${s.jobJitter} s, ${s.workers} worker(s), ${s.batches} batch(es); x ref = makespan / ${s.maxRunning ? 'rows x mean latency / cap' : 'clairvoyant schedule'}\n`,
  );
  printRunLines([...lines, median, worst]);
  if (json) console.log(JSON.stringify({ runs: reports, median, worst }, null, 2));
  process.exit(0);
}
const report = await runScenario(scenario);
printReport(report);
if (json) console.log(JSON.stringify(report, null, 2));
printDetails(report);
process.exit(0);

/** With --timeline: the requests per 10 s, and the last jobs made with their rows' submits. */
function printDetails(report: ScenarioReport): void {
  if (report.timeline) {
    console.log('');
    printTimeline(report.timeline);
  }
  if (report.lastSubmits) {
    console.log('');
    printLastSubmits(report.lastSubmits);
  }
}

function printReport(report: ScenarioReport): void {
  const fmt = (v: number | null | undefined, digits = 2) =>
    v === null || v === undefined ? '-' : v.toFixed(digits);
  const { vidbatch: v, naivePeer: p, settings: s } = report;
  const rows: [string, string, string][] = [
    ['makespan (s)', fmt(v.makespanS, 1), fmt(p?.makespanS, 1)],
    ['clairvoyant schedule (s)', fmt(v.clairvoyantS, 1), '-'],
    [
      'makespan / clairvoyant',
      fmt(v.ratioToClairvoyant),
      fmt(p && v.clairvoyantS ? p.makespanS / v.clairvoyantS : null),
    ],
    ['ideal bound (s)', fmt(v.boundS, 1), fmt(v.boundS, 1)],
    ['makespan / bound', fmt(v.ratioToBound), fmt(p?.ratioToBound)],
    ['429s per submitted job', fmt(v.rateLimitedPerJob, 3), fmt(p?.rateLimitedPerJob, 3)],
    ['requests per prompt (API)', fmt(v.requestsPerPrompt), fmt(p?.requestsPerPrompt)],
    ['video downloads per prompt', fmt(v.downloadsPerPrompt), '-'],
    ['jobs created', String(v.jobsCreated), '-'],
    ['history events per prompt', fmt(v.historyEventsPerPrompt, 1), '-'],
    ['  of which the batch', fmt(v.batchEventsPerPrompt, 1), '-'],
    ['largest run history (events)', String(v.largestRunEvents), '-'],
    ['billable actions per prompt (est.)', fmt(v.actionsPerPrompt, 1), '-'],
    ['worker peak RSS (MB)', fmt(v.workerPeakRssMb, 0), '-'],
    ['prompts per second', fmt(v.promptsPerSecond), '-'],
    ['bench process peak RSS (MB)', fmt(v.benchPeakRssMb, 0), '-'],
  ];
  if (v.stoppedAfterS !== null)
    rows.push([`prompts started by --stop-after ${v.stoppedAfterS}`, String(v.promptsStarted), '-']);
  const killed = v.killedWorker
    ? `, one SIGKILLed at ${v.killedWorker.atS.toFixed(1)} s`
    : s.killWorkerAt !== undefined
      ? `, none killed (done before ${s.killWorkerAt} s)`
      : '';
  console.log(
    `\n${s.prompts} prompts, rate limit ${s.rateLimit || 'none'} rps${s.maxRunning ? `, at most ${s.maxRunning} running jobs` : ''}, jobs ${s.jobSeconds}±${s.jobJitter} s, ${s.workers} worker(s)${killed}, ${s.batches} batch(es)\n`,
  );
  console.log(`${'metric'.padEnd(36)}${'vidbatch'.padStart(12)}${'naive peer'.padStart(12)}`);
  for (const [name, a, b] of rows) console.log(`${name.padEnd(36)}${a.padStart(12)}${b.padStart(12)}`);
  if (report.batches.length > 1) {
    console.log('\nbatch                                  done at (s)  submissions while all ran  requests');
    for (const b of report.batches)
      console.log(
        `${b.batchId.slice(0, 38).padEnd(38)} ${fmt(b.makespanS, 1).padStart(11)} ${fmt(b.submitShareWhileAllRan).padStart(26)} ${String(b.requests).padStart(9)}`,
      );
  }
}
