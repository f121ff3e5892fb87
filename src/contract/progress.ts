// A running batch's progress, as the `progress` query answers it. Imported by workflow code: no Node built-ins.
import type { PauseKind } from './batch';

export interface BatchProgress {
  batchId: string;
  total: number;
  started: number;
  inFlight: number;
  succeeded: number;
  failed: number;
  /** Prompts waiting for the gateway's Retry-After. */
  rateLimited: number;
  /** Epoch ms until which new submissions are held back after a 429, if in the future. */
  rateLimitedUntil: number | null;
  /** Why the batch is paused (auth failure or operator), or null. */
  pausedReason: string | null;
  /** What kind of pause. */
  pauseKind: PauseKind | null;
  /** Prompts blocked on the pause (a call failed with 401/403). */
  blocked: number;
  concurrency: number;
  startedAt: number;
  done: boolean;
  /** Where finished rows are recorded ('' until the first is). */
  manifestPath: string;
  /** Set once a guard rail stopped new submissions. */
  stoppedReason: string | null;
  /** Rows an earlier run already finished successfully: counted as succeeded, not submitted again. */
  skipped: number;
  /** Rows recorded from another batch's job for the same request (output root's request index): no new job. */
  reused: number;
  /** Rows that had a submit with an unknown outcome: each may have been billed more than once. */
  unknownSubmitRows: number;
  /** Epoch ms until which the gateway asked the batch to wait (Retry-After), when in the future. */
  holdUntil: number | null;
  /** Why the batch holds, e.g. "the gateway asked to wait until 03:10 UTC". */
  holdReason: string | null;
  /** "capacity gate: 10 jobs running (the gateway's cap), 3 rows waiting for a slot", or null. */
  capacityGate: string | null;
  /** Ids of the notices the batch started (contract/notice.ts noticeId), the latest last; absent: none. */
  notices?: string[];
}
