// The facts of `vidbatch report`: what the page shows and `--json` prints. Made from the batch's folder alone
// (manifest, jobs journal, the spend ledger folded from them), so a batch Temporal has forgotten still has
// one. Types only: the page, the command and the tests share them without loading any code.
import type { Ledger } from '../results/ledger';
import type { VerificationSummary } from '../results/verification-summary';

export interface ReportData {
  batchId: string;
  /** ISO time the report was made. */
  generatedAt: string;
  /** Where the batch's manifest and journal are (a folder, or its URL in the store). */
  folder: string;
  counts: ReportCounts;
  /** Every job the gateway made for the batch (results/ledger.ts), with its estimated cost given prices. */
  ledger: Ledger;
  /** The spend ledger as `results` and `status` print it. */
  ledgerLine: string;
  verification: VerificationSummary;
  timeline: Timeline;
  /** Failed rows (final state) by error code, most rows first. */
  failures: FailureClass[];
  /** Rows whose video arrived after the row had ended without it (`arrivedLate` on its last line). */
  lateArrivals: LateArrival[];
  /** Rows recorded from another batch's job for the same request (`reusedFrom` on its last line). */
  reused: ReusedRow[];
  gallery: GalleryLink;
}

export interface ReportCounts {
  /** Rows the folder mentions: in the manifest, or in the journal only. */
  rows: number;
  succeeded: number;
  failed: number;
  /** Rows with a job in the journal and no line in the manifest: in flight, or stopped before recording. */
  noOutcome: number;
  reused: number;
  arrivedLate: number;
  /** Rows whose submits had an unknown outcome: each may have been billed more than once. */
  unknownSubmitRows: number;
  /** Submits sent again (429 refusals and unsent retries), summed over the rows: see Timeline.retries. */
  submitRetries: number;
}

/** A row as the report lists it. */
export interface ReportRow {
  rowId: string;
  /** Its line in the input CSV. */
  line: number;
  prompt: string;
  jobId?: string;
  finishedAt: string;
}

export interface FailedRow extends ReportRow {
  errorMessage?: string;
}

export interface FailureClass {
  /** The error code; absent for rows that failed without one. */
  code?: string;
  rows: FailedRow[];
  /** What retries these rows: `vidbatch retry-failed <batch> --code <code>`. */
  retryCommand: string;
  /** Why a retry without `--code` leaves them out (results/export.ts leftOutReason), when it does. */
  caution?: string;
}

export interface LateArrival extends ReportRow {
  /** How the row had ended before its video came: deadline_exceeded or cancelled. */
  endedAs: string;
  endedAt: string;
}

export interface ReusedRow extends ReportRow {
  status: string;
  fromBatch: string;
  fromRow: string;
}

/**
 * The batch over time, sampled: `at[i]` (epoch ms) and each series' value there. At most MAX_POINTS samples;
 * a bigger batch is cut into equal spans, each sample holding the counts at its span's end and the most jobs
 * in flight during it.
 */
export interface Timeline {
  at: number[];
  /** Rows whose final state is succeeded, finished by then (cumulative). */
  succeeded: number[];
  /** Rows whose final state is failed, finished by then (cumulative). */
  failed: number[];
  /** Jobs submitted and not yet ended: from the journal's `at` or the row's `submittedAt` to its `finishedAt`. */
  inFlight: number[];
  /**
   * Submits sent again (cumulative), each row's counted when its submit went through (`submittedAt`, else its
   * `finishedAt`). No time of a 429 is recorded in the folder; a row's `attempts` counts its submits, 429
   * refusals included: attempts - 1 - unknownSubmits of them were sent again.
   */
  retries: number[];
  /** Jobs with no recorded end (their row has no later line): counted in flight to the timeline's end. */
  openJobs: number;
}

export interface GalleryLink {
  /** The review page, relative to the report page. */
  href: string;
  /** Whether it was there when the report was made. */
  exists: boolean;
  /** The command that writes it. */
  command: string;
}
