// How a prompt's steps end (shared by prompt.ts and prompt-enhance.ts): an activity's failure as PromptState
// reads it, the row's state in its search attribute, a result, a cancellable wait.
import {
  ActivityFailure,
  ApplicationFailure,
  isCancellation,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { PromptResult } from '../contract/prompt';
import { StateAttr } from '../contract/search-attributes';
import type { ActivityError, PromptState, ResultFields } from './prompt-state';

/** An activity's failure as PromptState reads it (its ApplicationFailure's type, message and first detail). */
export function activityError(err: unknown): ActivityError | undefined {
  if (!(err instanceof ActivityFailure && err.cause instanceof ApplicationFailure)) return undefined;
  const { type, message, details } = err.cause;
  return { ...(type ? { type } : {}), message, details: details?.[0] as ActivityError['details'] };
}

export const setState = (value: string) => upsertSearchAttributes([{ key: StateAttr, value }]);

/** A row ended: its state in the search attribute, its result. */
export function finish(state: PromptState, fields: ResultFields): PromptResult {
  setState(fields.status);
  return state.result(fields, new Date().toISOString());
}

/** Runs a wait; a cancellation meanwhile ends the row as cancelled while `waiting` (the caller returns it). */
export async function orCancelled<T>(state: PromptState, waiting: string, wait: () => Promise<T>) {
  try {
    return { value: await wait() };
  } catch (err) {
    if (isCancellation(err)) return { cancelled: finish(state, state.cancelled(waiting)) };
    throw err;
  }
}
