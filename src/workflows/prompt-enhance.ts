// A prompt's rewrite, before anything is paid for: one enhancePrompt activity on the gateway queue (so it
// takes its token of the shared rate budget and waits out this worker's Retry-After holds). A 429 is retried
// by Temporal after its Retry-After and fails nothing; a refused key (401/403) pauses the batch as a
// submit's does, and the rewrite goes on after `resume`; anything else ends the row `enhance_failed`, with no
// video job made for it. The rewrite itself is the activity's to read from the output root or ask for.
import { isCancellation, proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { ENHANCE_FAILED_CODE } from '../contract/enhance';
import { FailureType, RETRY_POLICIES } from '../contract/failures';
import type { PromptResult } from '../contract/prompt';
import type { gatewayActivityOptions } from '../contract/rate-budget';
import type { BatchLink } from './batch-link';
import { activityError, finish, orCancelled } from './prompt-outcome';
import type { PromptState } from './prompt-state';

/** The most of each prompt the Web UI's details show. */
const SHOWN = 1000;

/**
 * Rewrites the row's prompt (state.input.row becomes the row as sent, its original kept) and shows both in the
 * Web UI's details. Returns the row's result when it ended here; undefined to go on to the submit.
 */
export async function rewritePrompt(
  state: PromptState,
  batch: BatchLink,
  gateway: ReturnType<typeof gatewayActivityOptions>,
): Promise<PromptResult | undefined> {
  const { input } = state;
  const enhance = input.enhance!;
  const row = input.row;
  const { enhancePrompt } = proxyActivities<Activities>({
    ...gateway,
    startToCloseTimeout: input.activityTimeoutMs,
    retry: RETRY_POLICIES.enhancePrompt,
  });
  for (;;) {
    let got;
    try {
      got = await enhancePrompt.executeWithOptions({ summary: `rewrite the prompt of row ${row.id}` }, [
        {
          batchId: input.batchId,
          rowId: row.id,
          prompt: row.prompt,
          enhance,
          ...(input.outDir ? { outDir: input.outDir } : {}),
          unblockedAt: state.unblockedAt,
        },
      ]);
    } catch (err) {
      const error = activityError(err);
      if (error?.type === FailureType.Unauthorized || error?.type === FailureType.Forbidden) {
        const waited = await orCancelled(state, 'waiting for a working API key', () =>
          batch.waitForUnblock(error.message),
        );
        if (waited.cancelled) return waited.cancelled;
        continue;
      }
      if (isCancellation(err)) return finish(state, state.cancelled('rewriting its prompt'));
      const details = error?.details;
      if (details?.chatCalls) state.rewrite = { chatCalls: details.chatCalls };
      return finish(state, {
        status: 'failed',
        attempts: 0,
        polls: 0,
        errorCode: ENHANCE_FAILED_CODE,
        errorMessage: `the prompt could not be rewritten: ${error?.message ?? String(err)}`,
        ...(details?.requestId ? { requestId: details.requestId } : {}),
      });
    }
    input.row = {
      ...row,
      prompt: got.enhanced,
      originalPrompt: row.prompt,
      input: { ...row.input, prompt: got.enhanced },
    };
    const tokens = got.usage?.totalTokens;
    state.rewrite = got.cached ? {} : { chatCalls: 1, ...(tokens ? { chatTokens: tokens } : {}) };
    setCurrentDetails(
      `**Original prompt:** ${row.prompt.slice(0, SHOWN)}\n\n` +
        `**Sent prompt** (rewritten by ${enhance.model}${got.cached ? ', kept from an earlier rewrite' : ''}): ` +
        got.enhanced.slice(0, SHOWN),
    );
    return undefined;
  }
}
