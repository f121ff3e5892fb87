// Signals, queries and updates between the CLI, the batch and its prompts. Imported by workflow code: no
// Node built-ins.
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { BatchProgress } from './progress';
import type { PromptResult } from './prompt';

/** Reasons a prompt can report to its batch. */
export interface PromptBlocked {
  rowId: string;
  reason: string;
}

/** What became of a prompt's submit: the breaker, the unreachable pause and the capacity gate count these. */
export interface PromptSubmitOutcome {
  rowId: string;
  /**
   * `sent`: a job id came back (told by the submit activity); `unknown`: the gateway may have made a job;
   * `unreachable`: nothing could be sent; `capacity`: refused with a long Retry-After, the prompt waits for a
   * slot (`unblock`).
   */
  outcome: 'sent' | 'unknown' | 'unreachable' | 'capacity';
  /** The prompt waits for `unblock` before it sends again (a resend after an unknown outcome). */
  waiting?: boolean;
  /** What went wrong, for the pause's reason. */
  reason?: string;
  /** unreachable: epoch ms since when. */
  sinceMs?: number;
  /** capacity: the Retry-After the gateway gave (ms). */
  retryAfterMs?: number;
}

export const progressQuery = defineQuery<BatchProgress>('progress');
/** Resume a paused batch, e.g. after the API key was fixed. */
export const resumeSignal = defineSignal('resume');
export const resumeUpdate = defineUpdate<BatchProgress>('resume');
/** Pause a batch by hand: no new submissions, in-flight jobs keep being polled. */
export const pauseSignal = defineSignal<[reason: string]>('pause');
export const setConcurrencyUpdate = defineUpdate<BatchProgress, [concurrency: number]>('setConcurrency');
/** From a prompt workflow to its batch. */
export const promptBlockedSignal = defineSignal<[PromptBlocked]>('promptBlocked');
export const promptSubmitOutcomeSignal = defineSignal<[PromptSubmitOutcome]>('promptSubmitOutcome');
/** From a batch to a blocked prompt: try again. */
export const unblockSignal = defineSignal('unblock');
/**
 * A prompt ended: its result, sent to the batch's current run (the run that started it may have continued as
 * new since). The batch records it once, whichever way it learns of the end first.
 */
export const promptFinishedSignal = defineSignal<[PromptResult]>('promptFinished');
/**
 * Asked of a prompt that still runs after its row ended (it watches its job for a late video,
 * workflows/late-video.ts): the result its row ended with, as its batch recorded it.
 */
export const rowEndedQuery = defineQuery<PromptResult | undefined>('rowEnded');
/**
 * To the prompt whose job another batch's row now follows (it paid for the same request): that job is never
 * stopped at the provider under the follower, whatever becomes of this row.
 */
export const jobFollowedSignal = defineSignal<[JobFollowed]>('jobFollowed');
export interface JobFollowed {
  jobId: string;
  batchId: string;
  rowId: string;
}
