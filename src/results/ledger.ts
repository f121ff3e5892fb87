// The spend ledger: every job the gateway made for a batch, from what its folder holds (`manifest.jsonl`, every
// line, and the jobs journal `jobs.jsonl`), including the jobs no row kept. Each job id is counted once, in one
// category (README, "Spend ledger"); submits whose outcome was unknown may have made a job whose id never
// reached vidbatch, so they are an upper bound ("up to N more"), never a count.
import { replacesState, type PromptResult } from '../contract/prompt';
import { readJournal, type JournalEntry } from './jobs-journal';
import { readJsonl } from './jsonl';
import { manifestPath } from './manifest';
import { estimateCost, formatCost, type Priceable, type Prices } from './prices';

/**
 * Error codes of rows whose job vidbatch stopped checking (the job may still finish, and be billed), or refused.
 * None of them says the gateway ended the job: `check_failed` and `poll_failed` are vidbatch giving up on
 * status checks that kept failing (the job id is kept; a re-run checks it again).
 */
export const ABANDONED_CODES: ReadonlySet<string> = new Set([
  'cancelled',
  'deadline_exceeded',
  'workflow_failed',
  'check_failed',
  'poll_failed',
  'video_mismatch', // made and billed, but refused by --verify strict: kept by no row
]);

export interface Ledger {
  /** Rows of the batch (the CSV's, when the caller knows them; else the rows the folder mentions). */
  rows: number;
  /** Distinct job ids the gateway returned for the batch: kept + failedAtGateway + stopped + abandoned + pending. */
  jobsMade: number;
  /** Jobs whose row's final state is succeeded with that job. */
  kept: number;
  /**
   * Of the kept jobs, those whose video arrived after their row had ended (`deadline_exceeded`, `cancelled`):
   * late videos (docs/spend-safety.md#late-videos). Absent: none.
   */
  arrivedLate?: number;
  /** Jobs the gateway ended without a video: failed, moderated, completed without a URL, forgotten. */
  failedAtGateway: number;
  /**
   * Jobs of rows that ended while they went on, stopped at the provider by vidbatch (a cancel, a deadline with no
   * late videos kept): they bill no more than what they ran. Absent: none.
   */
  stopped?: number;
  /**
   * Jobs vidbatch stopped waiting for (cancelled, deadline exceeded, gave up checking), refused, or replaced by
   * a later key generation: they may still finish at the gateway and be billed.
   */
  abandoned: number;
  /** Jobs whose row has no outcome recorded after them yet: in flight, or the batch stopped before recording. */
  pending: number;
  /** Submits whose outcome was unknown: each may have made one more job (an upper bound, not a count). */
  unknown: number;
  /** Rows recorded from another batch's job for the same request: that batch's ledger counts the job. */
  reused: number;
  /** With prices: the estimated cost of the jobs made that have a price. */
  estimatedCost?: number;
  /** With prices: the most the unknown outcomes may have cost on top. */
  unknownCost?: number;
  /** With prices: jobs made (or unknown outcomes) with no price for their model and resolution. */
  unpriced?: number;
  currency?: string;
  /**
   * Chat calls the batch's rows made for their prompts' rewrites (docs/enhance-prompts.md), and their tokens
   * where the answers said: billed apart from the video jobs. A rewrite read from the output root is none.
   */
  chatCalls?: number;
  chatTokens?: number;
}

export interface LedgerOptions {
  /** The batch's row count (progress or result `total`); default: the rows the folder mentions. */
  rows?: number;
  prices?: Prices;
}

interface Job {
  rowId: string;
  generation: number;
  /** When the journal learned the job (ISO). */
  at?: string;
  /** The last manifest line that reports this job. */
  last?: PromptResult;
}

type Category = 'kept' | 'failedAtGateway' | 'stopped' | 'abandoned' | 'pending';

/** Folds every manifest line (in file order) and every journal entry into the ledger. */
export function foldLedger(
  lines: readonly PromptResult[],
  journal: readonly JournalEntry[],
  o: LedgerOptions = {},
): Ledger {
  const jobs = new Map<string, Job>();
  const finalByRow = new Map<string, PromptResult>();
  const rowInfo = new Map<string, Priceable>();
  const journalUnknown = new Map<string, number>();
  const manifestUnknown = new Map<string, number>();
  /** Highest generation of a job the row is known to have. */
  const topGeneration = new Map<string, number>();
  const seeGeneration = (rowId: string, g: number) =>
    topGeneration.set(rowId, Math.max(topGeneration.get(rowId) ?? -1, g));

  for (const e of journal) {
    if (e.unknown) journalUnknown.set(e.rowId, (journalUnknown.get(e.rowId) ?? 0) + 1);
    if (e.model && !rowInfo.has(e.rowId))
      rowInfo.set(e.rowId, {
        model: e.model,
        parameters: {
          ...(e.resolution ? { resolution: e.resolution } : {}),
          ...(e.duration !== undefined ? { duration: e.duration } : {}),
        },
      });
    // A job another batch's row paid for is counted there, once.
    if (!e.jobId || e.followedFrom) continue;
    seeGeneration(e.rowId, e.generation);
    if (!jobs.has(e.jobId)) jobs.set(e.jobId, { rowId: e.rowId, generation: e.generation, at: e.at });
  }
  const reusedRows = new Set<string>();
  let chatCalls = 0;
  let chatTokens = 0;
  for (const line of lines) {
    if (typeof line.rowId !== 'string') continue;
    // The last line wins, except the ended line a late video superseded (written after it, or in a store's order).
    if (!replacesState(finalByRow.get(line.rowId), line)) continue;
    finalByRow.set(line.rowId, line);
    // Each run of a row reports the chat calls it made itself (appends dedupe a line written twice).
    chatCalls += line.chatCalls ?? 0;
    chatTokens += line.chatTokens ?? 0;
    if (line.reusedFrom) {
      // Another batch paid for this job: counted once, there.
      reusedRows.add(line.rowId);
      continue;
    }
    reusedRows.delete(line.rowId);
    if (typeof line.model === 'string') rowInfo.set(line.rowId, line);
    const u = line.unknownSubmits ?? 0;
    if (u > (manifestUnknown.get(line.rowId) ?? 0)) manifestUnknown.set(line.rowId, u);
    if (!line.jobId) continue;
    const generation = line.generation ?? 0;
    seeGeneration(line.rowId, generation);
    const job = jobs.get(line.jobId) ?? { rowId: line.rowId, generation };
    job.last = line;
    jobs.set(line.jobId, job);
  }

  const categoryOf = (id: string, job: Job): Category => {
    const final = finalByRow.get(job.rowId);
    if (final?.status === 'succeeded' && final.jobId === id) return 'kept';
    if (job.last) {
      // A job the row gave up on and then stopped, or found ended, at the provider (workflows/stop-job.ts).
      if (job.last.jobStop === 'stopped') return 'stopped';
      if (job.last.jobStop === 'ended') return 'failedAtGateway';
      // Reported by a row that later kept another job, or given up on: abandoned. Else the gateway ended it.
      if (job.last.status === 'succeeded' || ABANDONED_CODES.has(job.last.errorCode ?? ''))
        return 'abandoned';
      return 'failedAtGateway';
    }
    // Never reported by a manifest line: replaced when the row has a job of a later generation.
    if ((topGeneration.get(job.rowId) ?? -1) > job.generation) return 'abandoned';
    // The row's outcome, if any, was recorded before this job was made: the job's outcome is still to come.
    if (!final || (job.at !== undefined && job.at > final.finishedAt)) return 'pending';
    return 'abandoned';
  };

  const counts: Record<Category, number> = {
    kept: 0,
    failedAtGateway: 0,
    stopped: 0,
    abandoned: 0,
    pending: 0,
  };
  let arrivedLate = 0;
  let cost = 0;
  let unpriced = 0;
  const priceOf = (rowId: string, info?: Priceable) => {
    const row = info ?? rowInfo.get(rowId);
    return row && estimateCost(row, o.prices);
  };
  for (const [id, job] of jobs) {
    const category = categoryOf(id, job);
    counts[category] += 1;
    if (category === 'kept' && finalByRow.get(job.rowId)?.arrivedLate) arrivedLate += 1;
    if (!o.prices) continue;
    const c = priceOf(job.rowId, job.last);
    if (c === undefined) unpriced += 1;
    else cost += c;
  }

  let unknown = 0;
  let unknownCost = 0;
  for (const rowId of new Set([...journalUnknown.keys(), ...manifestUnknown.keys()])) {
    // The journal lists every unknown outcome; the manifest's count covers one whose journal write failed.
    const n = Math.max(journalUnknown.get(rowId) ?? 0, manifestUnknown.get(rowId) ?? 0);
    unknown += n;
    if (!o.prices) continue;
    const c = priceOf(rowId);
    if (c === undefined) unpriced += n;
    else unknownCost += c * n;
  }

  const rowsSeen = new Set([...finalByRow.keys(), ...journal.map((e) => e.rowId)]).size;
  const { stopped, ...always } = counts;
  return {
    rows: o.rows ?? rowsSeen,
    jobsMade: jobs.size,
    ...always,
    ...(stopped ? { stopped } : {}),
    ...(arrivedLate ? { arrivedLate } : {}),
    unknown,
    reused: reusedRows.size,
    ...(chatCalls ? { chatCalls, ...(chatTokens ? { chatTokens } : {}) } : {}),
    ...(o.prices
      ? {
          estimatedCost: cost,
          ...(unknown ? { unknownCost } : {}),
          ...(unpriced ? { unpriced } : {}),
          ...(o.prices.currency ? { currency: o.prices.currency } : {}),
        }
      : {}),
  };
}

/** The ledger of the batch whose folder is `outDir` (`<out>/<batch-id>`): reads its manifest and journal. */
export async function computeLedger(outDir: string, o: LedgerOptions = {}): Promise<Ledger> {
  const [lines, journal] = await Promise.all([
    readJsonl<PromptResult>(manifestPath(outDir)),
    readJournal(outDir),
  ]);
  return foldLedger(lines, journal, o);
}

const count = (n: number) => n.toLocaleString('en-US');
const plural = (n: number, word: string) => `${count(n)} ${word}${n === 1 ? '' : 's'}`;

/**
 * "jobs made: 1,012 for 1,000 rows (1,000 kept (arrived late: 3), 8 abandoned, up to 4 more unknown), estimated
 * cost 12.34; abandoned jobs may still finish and be billed". Categories that are zero are left out, except kept.
 */
export function formatLedger(l: Ledger): string {
  const parts = [`${count(l.kept)} kept${l.arrivedLate ? ` (arrived late: ${count(l.arrivedLate)})` : ''}`];
  if (l.failedAtGateway) parts.push(`${count(l.failedAtGateway)} failed at the gateway`);
  if (l.stopped) parts.push(`${count(l.stopped)} stopped at the provider`);
  if (l.abandoned) parts.push(`${count(l.abandoned)} abandoned`);
  if (l.pending) parts.push(`${count(l.pending)} pending`);
  if (l.unknown) parts.push(`up to ${count(l.unknown)} more unknown`);
  if (l.reused) parts.push(`${plural(l.reused, 'row')} reusing jobs other batches paid for`);
  let text = `jobs made: ${count(l.jobsMade)} for ${plural(l.rows, 'row')} (${parts.join(', ')})`;
  if (l.estimatedCost !== undefined) {
    text += `, estimated cost ${formatCost(l.estimatedCost, l.currency)}`;
    if (l.unknownCost) text += ` (up to ${formatCost(l.unknownCost, l.currency)} more)`;
    if (l.unpriced) text += `; ${plural(l.unpriced, 'job')} without a price`;
  }
  // Not "failed": nobody saw these jobs end, so they may cost money yet.
  if (l.abandoned) text += '; abandoned jobs may still finish and be billed';
  if (l.chatCalls)
    text +=
      `; prompt rewrites: ${plural(l.chatCalls, 'chat call')}` +
      (l.chatTokens ? ` (${count(l.chatTokens)} tokens)` : '');
  return text;
}
