// The batch workflow's input, what it carries across continue-as-new, and its result. Imported by workflow
// code: no Node built-ins.
import type { BatchOptions } from './batch-options';
import type { PromptResult } from './prompt';

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
  /** Pauses a person had to act on, over the batch's life (each one's notice id counts them). */
  personPauses: number;
  /** Ids of the notices the batch started (contract/notice.ts noticeId), the latest last: `status` shows them. */
  notices: string[];
  /** POSTs over the batch's whole life, as far as it knows (earlier runs' journal lines, reports). */
  posts: number;
  /** The prompts still running when the run continued as new: the window slides on, it is not drained. */
  window: WindowCarry;
}

/** The prompts in flight and what the batch knows of each, as the next run takes them over. */
export interface WindowCarry {
  /** Rows whose prompts run; each reports its end to the batch's current run by signal. */
  inFlight: string[];
  /** Of those, the ones whose first submit has not reported yet (the spend cap and the capacity gate count them). */
  awaitingPost: string[];
  /** Prompts waiting for `unblock` after a 401/403, or for the breaker or unreachable pause to lift. */
  blocked: string[];
  /** In-flight rows whose earlier runs had an unknown submit outcome. */
  priorUnknown: string[];
  /** Prompts sleeping for a Retry-After, and until when (epoch ms). */
  rateLimited: [string, number][];
  holdReason: string | null;
  capacityGate: CapacityGateCarry | null;
  /** Rows that finished after the last group was recorded (at most one group): recorded by the next run. */
  results: PromptResult[];
}

/** The capacity gate's state (workflows/capacity-gate.ts); its timers are set again from the times. */
export interface CapacityGateCarry {
  running: string[];
  cap: number | null;
  waiting: string[];
  /** Rows sleeping out a short Retry-After, and until when (epoch ms). */
  sleeping: [string, number][];
  probeAt: number | null;
  probeOpen: boolean;
  probeRow: string | null;
  prepaid: number;
  sends: number[];
  sentCount: number;
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
  /** Ids of the notices the batch started (contract/notice.ts noticeId): `status` shows how each went. */
  notices?: string[];
}
