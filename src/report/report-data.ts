// The facts of `vidbatch report` from what a batch recorded in its folder: every manifest line, the jobs
// journal, and the spend ledger folded from both (results/ledger.ts). buildReport is pure, so it is tested on
// hand-made lines; readReportSources is the only part that reads, and it never asks Temporal.
import type { PromptResult } from '../contract/prompt';
import { readJournal, type JournalEntry } from '../results/jobs-journal';
import { readJsonl } from '../results/jsonl';
import { leftOutReason } from '../results/export';
import { foldLedger, formatLedger } from '../results/ledger';
import { finalStates, manifestPath } from '../results/manifest';
import type { Prices } from '../results/prices';
import { summarizeVerification } from '../results/verification-summary';
import type {
  FailedRow,
  FailureClass,
  GalleryLink,
  LateArrival,
  ReportData,
  ReportRow,
  ReusedRow,
} from './report-types';
import { buildTimeline, isRunOutcome, submitRetries } from './timeline';

export interface ReportSources {
  batchId: string;
  /** The batch's folder (or its URL in the store). */
  folder: string;
  /** Every manifest line, in file order (a row's last line is its final state). */
  lines: PromptResult[];
  journal: JournalEntry[];
}

export interface ReportOptions {
  gallery: GalleryLink;
  prices?: Prices;
  /** ISO time; default now. */
  generatedAt?: string;
  /** Flags every printed command needs besides the batch (`--out-root <dir>` when it is not the default). */
  commandFlags?: string;
}

/** The manifest and journal of the batch whose folder is `folder`: files only. */
export async function readReportSources(batchId: string, folder: string): Promise<ReportSources> {
  const [lines, journal] = await Promise.all([
    readJsonl<PromptResult>(manifestPath(folder)),
    readJournal(folder),
  ]);
  return { batchId, folder, lines, journal };
}

/** A word a shell passes as it is, else quoted: an error code is the gateway's text. */
export function shellWord(word: string): string {
  return /^[\w.:@%+,/=-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** The command that retries a failure class (without a code: every failed row that retry takes). */
export function retryCommand(batchId: string, code: string | undefined, flags = ''): string {
  return `vidbatch retry-failed ${batchId}${code === undefined ? '' : ` --code ${shellWord(code)}`}${flags}`;
}

function rowOf(r: PromptResult): ReportRow {
  return {
    rowId: r.rowId,
    line: r.line,
    prompt: r.prompt,
    ...(r.jobId ? { jobId: r.jobId } : {}),
    finishedAt: r.finishedAt,
  };
}

const byLine = (a: { line: number }, b: { line: number }) => a.line - b.line;

function failureClasses(batchId: string, finals: PromptResult[], flags?: string): FailureClass[] {
  const byCode = new Map<string | undefined, FailedRow[]>();
  for (const r of finals) {
    if (r.status !== 'failed') continue;
    const code = r.errorCode || undefined;
    const rows = byCode.get(code) ?? [];
    rows.push({ ...rowOf(r), ...(r.errorMessage ? { errorMessage: r.errorMessage } : {}) });
    byCode.set(code, rows);
  }
  return [...byCode]
    .map(([code, rows]): FailureClass => {
      const caution = leftOutReason(code);
      return {
        ...(code !== undefined ? { code } : {}),
        rows: rows.sort(byLine),
        retryCommand: retryCommand(batchId, code, flags),
        ...(caution ? { caution } : {}),
      };
    })
    .sort((a, b) => b.rows.length - a.rows.length || (a.code ?? '').localeCompare(b.code ?? ''));
}

/** The report's facts from the batch's recorded lines and journal. */
export function buildReport(sources: ReportSources, options: ReportOptions): ReportData {
  const { batchId, lines, journal } = sources;
  const finals = finalStates(lines).sort(byLine);
  const ledger = foldLedger(lines, journal, options.prices ? { prices: options.prices } : {});
  const recorded = new Set(finals.map((r) => r.rowId));
  const journalOnly = new Set(journal.filter((e) => !recorded.has(e.rowId)).map((e) => e.rowId));

  const lateArrivals: LateArrival[] = finals
    .filter((r) => r.arrivedLate)
    .map((r) => ({ ...rowOf(r), endedAs: r.arrivedLate!.endedAs, endedAt: r.arrivedLate!.endedAt }));
  const reused: ReusedRow[] = finals
    .filter((r) => r.reusedFrom)
    .map((r) => ({
      ...rowOf(r),
      status: r.status,
      fromBatch: r.reusedFrom!.batchId,
      fromRow: r.reusedFrom!.rowId,
    }));
  const timeline = buildTimeline(lines, journal);
  const submitRetryCount = lines
    .filter((r) => typeof r.rowId === 'string' && !r.reusedFrom && isRunOutcome(r))
    .reduce((n, r) => n + submitRetries(r), 0);

  return {
    batchId,
    generatedAt: options.generatedAt ?? new Date().toISOString(),
    folder: sources.folder,
    counts: {
      rows: recorded.size + journalOnly.size,
      succeeded: finals.filter((r) => r.status === 'succeeded').length,
      failed: finals.filter((r) => r.status === 'failed').length,
      noOutcome: journalOnly.size,
      reused: reused.length,
      arrivedLate: lateArrivals.length,
      unknownSubmitRows: finals.filter((r) => (r.unknownSubmits ?? 0) > 0).length,
      submitRetries: submitRetryCount,
    },
    ledger,
    ledgerLine: formatLedger(ledger),
    verification: summarizeVerification(finals),
    timeline,
    failures: failureClasses(batchId, finals, options.commandFlags),
    lateArrivals,
    reused,
    gallery: options.gallery,
  };
}
