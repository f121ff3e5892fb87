// `npm run bench -- --repeat N`: the same scenario N times in a row, each on a fresh dev server and simulators
// (one run cannot tell a slow case from a usual one): a line per run, then the median and the worst of each
// figure.
import type { ScenarioReport } from './scenario';

export interface RunLine {
  run: number | 'median' | 'worst';
  makespanS: number;
  /** makespan / clairvoyant schedule (or / rows x latency / cap for a running-jobs cap); null without one. */
  ratio: number | null;
  requestsPerPrompt: number;
  rateLimitedPerJob: number;
  /** When the last job was made (s from the start), from --timeline's last submits; null without it. */
  lastJobS: number | null;
}

export function runLine(run: number, r: ScenarioReport): RunLine {
  const v = r.vidbatch;
  const reference = r.settings.maxRunning > 0 ? v.boundS : v.clairvoyantS;
  return {
    run,
    makespanS: v.makespanS,
    ratio: reference ? v.makespanS / reference : null,
    requestsPerPrompt: v.requestsPerPrompt,
    rateLimitedPerJob: v.rateLimitedPerJob,
    lastJobS: r.lastSubmits?.at(-1)?.madeAtS ?? null,
  };
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** The median and the worst (highest) of each figure over the runs; a figure no run has stays null. */
export function summarize(lines: readonly RunLine[]): [RunLine, RunLine] {
  const of = (f: (l: RunLine) => number | null) =>
    lines.map(f).filter((v): v is number => v !== null && Number.isFinite(v));
  /** The figure's median (`pick` 0) or worst (1) over the runs; null when no run has it. */
  const stat = (f: (l: RunLine) => number | null, pick: 0 | 1): number | null => {
    const values = of(f);
    if (!values.length) return null;
    return pick === 0 ? median(values) : Math.max(...values);
  };
  const line = (run: 'median' | 'worst', pick: 0 | 1): RunLine => ({
    run,
    makespanS: stat((l) => l.makespanS, pick) ?? Number.NaN,
    ratio: stat((l) => l.ratio, pick),
    requestsPerPrompt: stat((l) => l.requestsPerPrompt, pick) ?? Number.NaN,
    rateLimitedPerJob: stat((l) => l.rateLimitedPerJob, pick) ?? Number.NaN,
    lastJobS: stat((l) => l.lastJobS, pick),
  });
  return [line('median', 0), line('worst', 1)];
}

export function printRunLines(lines: readonly RunLine[], log: (line: string) => void = console.log): void {
  const fmt = (v: number | null, digits: number) => (v === null || Number.isNaN(v) ? '-' : v.toFixed(digits));
  log('run       makespan (s)  x ref  req/prompt  429/job  last job made (s)');
  for (const l of lines)
    log(
      `${String(l.run).padEnd(8)} ${fmt(l.makespanS, 1).padStart(13)} ${fmt(l.ratio, 2).padStart(6)} ${fmt(l.requestsPerPrompt, 2).padStart(11)} ${fmt(l.rateLimitedPerJob, 3).padStart(8)} ${fmt(l.lastJobS, 1).padStart(18)}`,
    );
}
