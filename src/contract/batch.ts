// The batch workflow's input, what it carries across continue-as-new, and its result. Imported by workflow
// code: no Node built-ins.
import type { BatchOptions } from './batch-options';

export const MAX_RESULT_GROUP_BYTES = 512 * 1024;

export interface BatchInput {
  batchId: string;
  /** Path of the CSV as the workers see it, and the sha256 of its content (checked on every read). */
  csvPath: string;
  csvSha256: string;
  totalRows: number;
  options: BatchOptions;
  /** The batch whose failed rows this batch retries. */
  retryOf?: string;
  /** retry-failed: the original batch's output folder, consulted for known jobs of the same row ids. */
  priorOutDir?: string;
  /** Carried across continue-as-new. */
  carry?: BatchCarry;
}

export interface BatchCarry {
  /** Index of the first row not yet started; rows start in file order. */
  nextRow: number;
  counts: BatchCounts;
  startedAt: number;
  concurrency: number;
  pausedReason: string | null;
  gateUntil: number;
  manifestPath: string;
  runs: number;
  stoppedReason: string | null;
  /** Rows counted as succeeded because an earlier run of the batch finished them (not submitted again). */
  skipped: number;
  /** Rows recorded from another batch's job for the same request (output root's request index): no new job. */
  reused: number;
  /** Rows that had a submit with an unknown outcome (each may have been billed more than once). */
  unknownSubmitRows: number;
  /** What paused the batch; null when it is not paused. */
  pauseKind: PauseKind | null;
  /** Submits in a row with an unknown outcome (the breaker's count). */
  unknownInARow: number;
  /** POSTs over the batch's whole life, as far as it knows (earlier runs' journal lines, reports). */
  posts: number;
}

/**
 * Why a batch is paused: `unreachable` lifts itself when a submit goes through again; the others wait for
 * `resume` (`breaker`: unknown submit outcomes in a row; `recording`: the manifest could not be written).
 */
export type PauseKind = 'operator' | 'key' | 'input' | 'unreachable' | 'breaker' | 'recording';

export interface BatchCounts {
  succeeded: number;
  failed: number;
}

export interface BatchResult {
  batchId: string;
  total: number;
  succeeded: number;
  failed: number;
  manifestPath: string;
  /** Rows never submitted because a guard rail stopped the batch. */
  notStarted: number;
  /** Which guard rail stopped the batch, if one did. */
  stoppedReason?: string;
  /** Rows finished by an earlier run of the batch, counted in `succeeded`, not submitted again. */
  skipped: number;
  /** Rows recorded from another batch's job for the same request (output root's request index): no new job. */
  reused: number;
  /** Rows that had a submit with an unknown outcome (may have been billed more than once). */
  unknownSubmitRows: number;
}
