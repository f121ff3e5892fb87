// The batch over time, from the times its folder recorded: rows finished (the manifest's finishedAt), jobs in
// flight (the journal's `at` or a line's submittedAt, to the line that reports the job's end) and submits sent
// again. Nothing here is an estimate of a time the folder does not hold: a 429 has no time of its own in the
// folder, so a row's resends are placed at the moment its submit went through (see Timeline.retries).
import type { PromptResult } from '../contract/prompt';
import type { JournalEntry } from '../results/jobs-journal';
import { finalStates } from '../results/manifest';
import type { Timeline } from './report-types';

/** Samples at most: a chart of 400 steps is finer than the page draws it, and keeps `--json` short. */
export const MAX_POINTS = 400;

/** The code of a row whose submits all had an unknown outcome (workflows/prompt-state.ts SUBMIT_UNKNOWN_CODE). */
const SUBMIT_UNKNOWN = 'submit_unknown';

/**
 * Submits of the run this line reports that were sent again: its `attempts` count every submit, the ones refused
 * with 429 and those with an unknown outcome included (workflows/prompt-state.ts), so those beyond the first,
 * less the unknown ones, were 429s or attempts that never reached the gateway. A row whose every submit was
 * unknown had no first one that went through.
 */
export function submitRetries(r: Pick<PromptResult, 'attempts' | 'unknownSubmits' | 'errorCode'>): number {
  const first = r.errorCode === SUBMIT_UNKNOWN ? 0 : 1;
  return Math.max(0, (r.attempts ?? 0) - (r.unknownSubmits ?? 0) - first);
}

/** Whether a manifest line is an outcome of a run of its row (not a copy `vidbatch download` or a late video appended). */
export function isRunOutcome(r: PromptResult): boolean {
  return !r.downloadedAt && !r.arrivedLate;
}

const ms = (iso: string | undefined): number | undefined => {
  const t = iso === undefined ? NaN : Date.parse(iso);
  return Number.isFinite(t) ? t : undefined;
};

type Series = 'succeeded' | 'failed' | 'inFlight' | 'retries';
interface Change {
  at: number;
  series: Series;
  by: number;
}

interface Span {
  rowId: string;
  start: number;
  end?: number;
}

/**
 * When the batch waited for each job: from its journal entry (or its line's submittedAt) to the line that
 * reports it. A later run that checks the same job again waits anew from that run's submittedAt; a video that
 * arrived late keeps its job in flight until it came. A job no line reports (a later generation replaced it, or
 * the batch stopped) ends with its row's next recorded outcome, else it is open.
 */
function jobSpans(lines: readonly PromptResult[], journal: readonly JournalEntry[]): Span[] {
  const journalled = new Map<string, { rowId: string; at?: number }>();
  for (const e of journal) {
    if (!e.jobId) continue;
    const at = ms(e.at);
    const known = journalled.get(e.jobId);
    if (!known) journalled.set(e.jobId, { rowId: e.rowId, ...(at !== undefined ? { at } : {}) });
    else if (at !== undefined && (known.at === undefined || at < known.at)) known.at = at;
  }
  const reports = new Map<string, PromptResult[]>();
  const outcomes = new Map<string, number[]>();
  for (const line of lines) {
    if (typeof line.rowId !== 'string' || line.downloadedAt) continue;
    const at = ms(line.finishedAt);
    if (at !== undefined) outcomes.set(line.rowId, [...(outcomes.get(line.rowId) ?? []), at]);
    // A reused row's line carries the other batch's submittedAt: this batch waited for that job only if its
    // journal says it followed it (from then on).
    if (line.reusedFrom && !(line.jobId && journalled.has(line.jobId))) continue;
    if (line.jobId) reports.set(line.jobId, [...(reports.get(line.jobId) ?? []), line]);
  }
  const spans: Span[] = [];
  for (const id of new Set([...journalled.keys(), ...reports.keys()])) {
    // In the order the job's outcomes came (a row's ended line may be written after its late video's).
    const told = (reports.get(id) ?? []).sort((a, b) => (ms(a.finishedAt) ?? 0) - (ms(b.finishedAt) ?? 0));
    let open: Span | undefined;
    let start = journalled.get(id)?.at;
    for (const line of told) {
      const end = ms(line.finishedAt);
      if (line.arrivedLate && open) {
        if (end !== undefined) open.end = Math.max(open.end ?? end, end);
        continue;
      }
      const submitted = line.reusedFrom ? undefined : ms(line.submittedAt);
      start = start === undefined ? submitted : submitted === undefined ? start : Math.min(start, submitted);
      // A line with no start (a known job found finished at its first check) was never waited for.
      if (start === undefined) continue;
      open = { rowId: line.rowId, start, ...(end !== undefined ? { end: Math.max(end, start) } : {}) };
      spans.push(open);
      start = undefined;
    }
    if (told.length || start === undefined) continue;
    const rowId = journalled.get(id)!.rowId;
    const from = start;
    const later = (outcomes.get(rowId) ?? []).filter((t) => t >= from);
    const next = later.length ? Math.min(...later) : undefined;
    spans.push({ rowId, start: from, ...(next !== undefined ? { end: next } : {}) });
  }
  return spans;
}

/** The batch over time from every manifest line (file order) and journal entry; see Timeline. */
export function buildTimeline(
  lines: readonly PromptResult[],
  journal: readonly JournalEntry[],
  maxPoints = MAX_POINTS,
): Timeline {
  const changes: Change[] = [];
  for (const r of finalStates(lines)) {
    const at = ms(r.finishedAt);
    if (at !== undefined && (r.status === 'succeeded' || r.status === 'failed'))
      changes.push({ at, series: r.status, by: 1 });
  }
  for (const r of lines) {
    // A reused row's submits were the other batch's; a late video or a download repeats a run's line.
    if (typeof r.rowId !== 'string' || r.reusedFrom || !isRunOutcome(r)) continue;
    const n = submitRetries(r);
    const at = ms(r.submittedAt) ?? ms(r.finishedAt);
    if (n > 0 && at !== undefined) changes.push({ at, series: 'retries', by: n });
  }
  const spans = jobSpans(lines, journal);
  for (const s of spans) {
    changes.push({ at: s.start, series: 'inFlight', by: 1 });
    if (s.end !== undefined) changes.push({ at: s.end, series: 'inFlight', by: -1 });
  }
  const openJobs = spans.filter((s) => s.end === undefined).length;
  if (!changes.length) return { at: [], succeeded: [], failed: [], inFlight: [], retries: [], openJobs };

  changes.sort((a, b) => a.at - b.at);
  const times = [...new Set(changes.map((c) => c.at))];
  const first = times[0]!;
  const last = times.at(-1)!;
  // Each sample closes a span: one per recorded time when they are few, else equal spans of the whole.
  const ends =
    times.length <= maxPoints
      ? times
      : Array.from({ length: maxPoints }, (_, i) =>
          i === maxPoints - 1 ? last : first + ((last - first) * (i + 1)) / maxPoints,
        );
  const now = { succeeded: 0, failed: 0, inFlight: 0, retries: 0 };
  const out: Timeline = { at: [], succeeded: [], failed: [], inFlight: [], retries: [], openJobs };
  let next = 0;
  for (const end of ends) {
    // The most jobs in flight during the span: its start's, or after any time in it.
    let peak = now.inFlight;
    while (next < changes.length && changes[next]!.at <= end) {
      const at = changes[next]!.at;
      while (next < changes.length && changes[next]!.at === at) {
        const c = changes[next++]!;
        now[c.series] += c.by;
      }
      peak = Math.max(peak, now.inFlight);
    }
    out.at.push(Math.round(end));
    out.succeeded.push(now.succeeded);
    out.failed.push(now.failed);
    out.inFlight.push(times.length <= maxPoints ? now.inFlight : peak);
    out.retries.push(now.retries);
  }
  return out;
}
