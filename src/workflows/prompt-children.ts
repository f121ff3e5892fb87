// A row's prompt as a child of the batch that outlives the run that started it, so the window slides across
// continue-as-new: starting it, asking every one to cancel, and the check of those an earlier run started
// (no later run is told when one closes).
import {
  CancellationScope,
  ChildWorkflowCancellationType,
  getExternalWorkflowHandle,
  ParentClosePolicy,
  sleep,
  startChild,
} from '@temporalio/workflow';
import type { BatchInput } from '../contract/batch';
import { promptSpendOptions, promptWorkflowId, type PromptResult } from '../contract/prompt';
import type { PriorOutcome, PromptRow } from '../contract/rows';
import { BatchIdAttr, StateAttr } from '../contract/search-attributes';
import type { BatchState } from './batch-state';
import { promptWorkflow } from './prompt';

/** How often the batch asks after the prompts an earlier run started, in case one ended unheard. */
const CARRIED_CHECK_MS = 10 * 60_000;
/** Prompts asked to cancel at once (a server takes at most 2,000 pending cancel requests per workflow). */
const CANCEL_AT_ONCE = 100;

/** Asks each prompt to cancel; each then reports its end (a submit in flight finishes, so its job id is kept). */
export async function cancelPrompts(batchId: string, rowIds: string[]): Promise<void> {
  for (let i = 0; i < rowIds.length; i += CANCEL_AT_ONCE)
    await Promise.all(
      rowIds.slice(i, i + CANCEL_AT_ONCE).map(
        (rowId) =>
          getExternalWorkflowHandle(promptWorkflowId(batchId, rowId))
            .cancel()
            .catch(() => undefined), // it ended meanwhile: its result is on its way
      ),
    );
}

/**
 * Every CARRIED_CHECK_MS, asks (`ended`, the endedPrompts activity) which of the prompts this run took over have
 * ended, and hands their results to `finished`: a prompt that ends without its signal (someone terminated it)
 * would otherwise hold the batch forever. Kept through a cancel, which waits for every prompt.
 */
export function watchCarried(
  input: BatchInput,
  ended: (rowIds: string[]) => Promise<PromptResult[]>,
  state: BatchState,
  finished: (result: PromptResult) => void,
): void {
  const carried = input.carry?.window.inFlight ?? [];
  if (carried.length === 0) return;
  void CancellationScope.nonCancellable(async () => {
    for (;;) {
      await sleep(CARRIED_CHECK_MS, { summary: 'look for prompts of earlier runs that ended unheard' });
      const rowIds = carried.filter((rowId) => state.inFlight.has(rowId));
      if (rowIds.length === 0) return;
      for (const result of await ended(rowIds).catch(() => [])) finished(result); // else asked again next time
    }
  });
}

/** What the prompt of a row needs from its prior outcome: the job to check first, and the key generation. */
function priorArgs(prior: PriorOutcome | undefined): {
  knownJobId?: string;
  knownJobStopped?: true;
  keyGeneration: number;
} {
  if (!prior) return { keyGeneration: 0 };
  // A newer generation than the known job's had only unknown outcomes: reuse it, never skip it (a gateway
  // that honours keys then returns the job that generation may have made).
  if (prior.jobId && prior.generation > (prior.jobGeneration ?? prior.generation))
    return { knownJobId: prior.jobId, keyGeneration: prior.generation };
  // A known job is checked before paying again; a new submit then needs a key the gateway has not seen (it
  // would replay the failed or gone job). Without a job id the same key goes again: a gateway that honours
  // it returns the job an unknown outcome may have made.
  if (prior.jobId)
    return {
      knownJobId: prior.jobId,
      ...(prior.jobStopped ? { knownJobStopped: prior.jobStopped } : {}),
      keyGeneration: prior.generation + 1,
    };
  return { keyGeneration: prior.generation };
}

/**
 * Starts one row's prompt workflow, a child of the batch with id `<batch-id>/<row-id>`. It outlives the run that
 * started it (the window slides across continue-as-new) and reports its end to the batch's current run; a
 * cancel of the batch asks it to cancel (batchWorkflow).
 */
export function startPrompt(input: BatchInput, row: PromptRow, prior: PriorOutcome | undefined) {
  const { batchId, options } = input;
  return startChild(promptWorkflow, {
    workflowId: promptWorkflowId(batchId, row.id),
    parentClosePolicy: ParentClosePolicy.ABANDON,
    cancellationType: ChildWorkflowCancellationType.ABANDON,
    args: [
      {
        batchId,
        row,
        poll: options.poll,
        jobDeadlineMs: options.jobDeadlineMs,
        activityTimeoutMs: options.activityTimeoutMs,
        ...(options.downloadDir ? { downloadDir: options.downloadDir } : {}),
        ...priorArgs(prior),
        ...(prior?.followedFrom ? { followedFrom: prior.followedFrom } : {}),
        ...promptSpendOptions(options),
        ...(options.notify?.length ? { notice: { to: options.notify, csvPath: input.csvPath } } : {}),
        priorUnknownSubmits: prior?.unknownSubmits ?? 0,
        // A batch that reuses what its root paid for also claims each request before paying for it.
        claimRequest: options.reuse,
        ...(input.retryOf ? { keyBatchId: input.retryOf } : {}),
        // A row of a reviewed CSV (`original_prompt`) is sent as it is: never rewritten twice.
        ...(options.enhance && row.originalPrompt === undefined ? { enhance: options.enhance } : {}),
      },
    ],
    typedSearchAttributes: [
      { key: BatchIdAttr, value: batchId },
      { key: StateAttr, value: 'submitting' },
    ],
    staticSummary: `Row ${row.id} (line ${row.line}) of ${batchId}`,
    staticDetails:
      (row.originalPrompt !== undefined
        ? `**Original prompt:** ${row.originalPrompt.slice(0, 500)}\n\n`
        : '') +
      `**Prompt:** ${row.prompt.slice(0, 500)}\n\n**Model:** ${row.model} · ${JSON.stringify(row.parameters)}`,
  });
}
