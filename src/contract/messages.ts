// Signals, queries and updates between the CLI, the batch and its prompts. Imported by workflow code: no
// Node built-ins.
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { BatchProgress } from './types';

/** Reasons a prompt can report to its batch. */
export interface PromptBlocked {
  rowId: string;
  reason: string;
}
export interface PromptRateLimited {
  rowId: string;
  untilMs: number;
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
export const promptRateLimitedSignal = defineSignal<[PromptRateLimited]>('promptRateLimited');
/** From a batch to a blocked prompt: try again. */
export const unblockSignal = defineSignal('unblock');
