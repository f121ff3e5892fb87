// `npm run bench -- --targets`: the four target scenarios, one after another, each on a fresh dev server
// and simulators (bench/scenario.ts), then one table: vidbatch beside the naive peer, the reference schedule,
// the target and whether it was met. `--scale-down N` shrinks every scenario for a quick smoke run.
import { cpus } from 'node:os';
import { runScenario, type ScenarioOptions, type ScenarioReport } from './scenario';
import { printLastSubmits, printTimeline } from './timeline';

/** Scenario flags that --targets sets itself (commander's camelCase names). */
export const SCENARIO_FLAGS = [
  'prompts',
  'rateLimit',
  'jobSeconds',
  'jobJitter',
  'scale',
  'workerHeap',
  'workers',
  'killWorkerAt',
  'batches',
  'maxRunning',
  'stopAfter',
] as const;

interface Target {
  /** makespan / reference at most this. */
  ratio: number;
  requestsPerPrompt?: number;
  rateLimitedPerJob?: number;
  /** Each batch's share of the submissions while all batches ran, within [low, high]. */
  share?: [number, number];
}

interface TargetScenario {
  name: string;
  options: Omit<ScenarioOptions, 'peer' | 'timeline' | 'temporalAddress'>;
  target: Target;
}

const base = {
  prompts: 300,
  rateLimit: 5,
  jobSeconds: 60,
  jobJitter: 20,
  workers: 1,
  batches: 1,
  maxRunning: 0,
};

export const TARGET_SCENARIOS: TargetScenario[] = [
  {
    name: '300 prompts, 5 rps, 60±20 s, 1 worker',
    options: base,
    target: { ratio: 1.1, requestsPerPrompt: 2.15, rateLimitedPerJob: 0.03 },
  },
  {
    name: 'same, 3 workers, one SIGKILLed at 60 s',
    options: { ...base, workers: 3, killWorkerAt: 60 },
    target: { ratio: 1.15, requestsPerPrompt: 2.2, rateLimitedPerJob: 0.05 },
  },
  {
    name: 'same, 2 batches of 150 at once',
    options: { ...base, batches: 2 },
    target: { ratio: 1.15, share: [0.4, 0.6] },
  },
  {
    name: 'cap of 10 running jobs, 100 prompts, 30±10 s',
    options: { ...base, prompts: 100, rateLimit: 0, jobSeconds: 30, jobJitter: 10, maxRunning: 10 },
    target: { ratio: 1.15, rateLimitedPerJob: 0.5 },
  },
];

/** Every size and time divided by `n` (a smoke run; prompts stay >= 2 per batch, the cap >= 2). */
export function scaledDown(options: TargetScenario['options'], n: number): TargetScenario['options'] {
  if (n === 1) return options;
  return {
    ...options,
    prompts: Math.max(2 * options.batches, Math.round(options.prompts / n)),
    jobSeconds: options.jobSeconds / n,
    jobJitter: options.jobJitter / n,
    killWorkerAt: options.killWorkerAt === undefined ? undefined : options.killWorkerAt / n,
    maxRunning: options.maxRunning ? Math.max(2, Math.round(options.maxRunning / n)) : 0,
  };
}

export interface TargetRow {
  scenario: string;
  /** makespan / clairvoyant; for the running-jobs cap, makespan / (rows x mean latency / cap). */
  ratio: number | null;
  requestsPerPrompt: number;
  rateLimitedPerJob: number;
  /** Each batch's share of the submissions made while all batches ran (2-batch scenario only). */
  shares: number[] | null;
  killedWorkerAtS: number | null;
  peerRatio: number | null;
  peerRequestsPerPrompt: number | null;
  peerRateLimitedPerJob: number | null;
  referenceS: number | null;
  makespanS: number;
  target: string;
  met: boolean;
  /** What missed, e.g. "ratio 1.21 > 1.15". */
  missed: string[];
}

function describeTarget(t: Target): string {
  return [
    `x<=${t.ratio.toFixed(2)}`,
    t.requestsPerPrompt !== undefined ? `req<=${t.requestsPerPrompt.toFixed(2)}` : '',
    t.rateLimitedPerJob !== undefined ? `429<=${t.rateLimitedPerJob}` : '',
    t.share ? `share ${t.share[0] * 100}-${t.share[1] * 100}%` : '',
  ]
    .filter(Boolean)
    .join(' ');
}

export function targetRow(name: string, target: Target, r: ScenarioReport): TargetRow {
  const v = r.vidbatch;
  // The running-jobs cap has no clairvoyant schedule here; the issue's reference is rows x latency / cap.
  const referenceS = r.settings.maxRunning > 0 ? v.boundS : v.clairvoyantS;
  const ratio = referenceS ? v.makespanS / referenceS : null;
  const shares = r.batches.length > 1 ? r.batches.map((b) => b.submitShareWhileAllRan ?? Number.NaN) : null;
  const missed: string[] = [];
  if (ratio === null || ratio > target.ratio)
    missed.push(`ratio ${ratio?.toFixed(2) ?? '-'} > ${target.ratio.toFixed(2)}`);
  if (target.requestsPerPrompt !== undefined && v.requestsPerPrompt > target.requestsPerPrompt)
    missed.push(`req ${v.requestsPerPrompt.toFixed(2)} > ${target.requestsPerPrompt.toFixed(2)}`);
  if (target.rateLimitedPerJob !== undefined && v.rateLimitedPerJob > target.rateLimitedPerJob)
    missed.push(`429 ${v.rateLimitedPerJob.toFixed(3)} > ${target.rateLimitedPerJob}`);
  if (target.share) {
    const [low, high] = target.share;
    const off = (shares ?? [Number.NaN]).filter((s) => !(s >= low && s <= high));
    if (off.length) missed.push(`share ${off.map((s) => `${(s * 100).toFixed(0)}%`).join('/')}`);
  }
  if (v.failed > 0 || v.succeeded < r.settings.prompts)
    missed.push(`${v.succeeded} of ${r.settings.prompts} succeeded`);
  const p = r.naivePeer;
  return {
    scenario: name,
    ratio,
    requestsPerPrompt: v.requestsPerPrompt,
    rateLimitedPerJob: v.rateLimitedPerJob,
    shares,
    killedWorkerAtS: v.killedWorker?.atS ?? null,
    peerRatio: p && referenceS ? p.makespanS / referenceS : null,
    peerRequestsPerPrompt: p?.requestsPerPrompt ?? null,
    peerRateLimitedPerJob: p?.rateLimitedPerJob ?? null,
    referenceS,
    makespanS: v.makespanS,
    target: describeTarget(target),
    met: missed.length === 0,
    missed,
  };
}

const fmt = (v: number | null | undefined, digits = 2) =>
  v === null || v === undefined || Number.isNaN(v) ? '-' : v.toFixed(digits);

const COLUMNS: [string, number, (r: TargetRow) => string][] = [
  ['scenario', 44, (r) => r.scenario],
  ['x ref', 6, (r) => fmt(r.ratio)],
  ['req/prompt', 10, (r) => fmt(r.requestsPerPrompt)],
  ['429/job', 7, (r) => fmt(r.rateLimitedPerJob, 3)],
  ['shares', 7, (r) => r.shares?.map((s) => fmt(s * 100, 0)).join('/') ?? '-'],
  ['peer x', 6, (r) => fmt(r.peerRatio)],
  ['peer req', 8, (r) => fmt(r.peerRequestsPerPrompt)],
  ['peer 429', 8, (r) => fmt(r.peerRateLimitedPerJob, 3)],
  ['ref (s)', 7, (r) => fmt(r.referenceS, 1)],
  ['makespan', 8, (r) => fmt(r.makespanS, 1)],
  ['target', 38, (r) => r.target],
  ['result', 6, (r) => (r.met ? 'met' : `missed: ${r.missed.join(', ')}`)],
];

export function printTargetTable(
  rows: readonly TargetRow[],
  log: (line: string) => void = console.log,
): void {
  const line = (cells: string[]) =>
    cells
      .map((c, i) =>
        i === 0 || i >= COLUMNS.length - 2 ? c.padEnd(COLUMNS[i]![1]) : c.padStart(COLUMNS[i]![1]),
      )
      .join('  ')
      .trimEnd();
  log(line(COLUMNS.map(([h]) => h)));
  for (const r of rows) log(line(COLUMNS.map(([, , f]) => f(r))));
}

export async function runTargets(o: {
  peer: boolean;
  timeline: boolean;
  json: boolean;
  scaleDown: number;
  temporalAddress?: string;
}): Promise<TargetRow[]> {
  const rows: TargetRow[] = [];
  const reports: ScenarioReport[] = [];
  for (const [i, s] of TARGET_SCENARIOS.entries()) {
    const options = scaledDown(s.options, o.scaleDown);
    console.error(`[bench] target ${i + 1}/${TARGET_SCENARIOS.length}: ${s.name}`);
    const report = await runScenario({
      ...options,
      peer: o.peer,
      timeline: o.timeline,
      temporalAddress: o.temporalAddress,
    });
    reports.push(report);
    rows.push(targetRow(s.name, s.target, report));
    console.error(`[bench] ${s.name}: ${fmt(report.vidbatch.makespanS, 1)} s`);
  }
  console.log(
    `\ntargets${o.scaleDown > 1 ? ` (scaled down ${o.scaleDown}x: a smoke run, targets do not apply)` : ''}; x ref = makespan / reference (clairvoyant schedule; for the running-jobs cap rows x mean latency / cap)\n`,
  );
  printTargetTable(rows);
  if (o.timeline)
    for (const [i, r] of reports.entries()) {
      console.log(`\n${TARGET_SCENARIOS[i]!.name}: requests per 10 s`);
      printTimeline(r.timeline ?? []);
      if (r.lastSubmits) printLastSubmits(r.lastSubmits);
    }
  if (o.json)
    console.log(
      JSON.stringify(
        {
          machine: { cores: cpus().length, node: process.version },
          scaleDown: o.scaleDown,
          scenarios: rows.map((row, i) => ({
            ...row,
            timeline: reports[i]!.timeline,
            report: { ...reports[i]!, timeline: undefined },
          })),
        },
        null,
        2,
      ),
    );
  return rows;
}
