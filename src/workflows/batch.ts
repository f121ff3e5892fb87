// The batch: reads rows page by page (through an activity), keeps at most `concurrency` prompt workflows in
// flight, records finished prompts in groups, and continues as new after `promptsPerRun` prompts so that
// every run's history stays small. A 429 holds back new submissions for the whole batch; a 401/403 pauses
// it until an operator resumes it. The rules are in batch-state.ts and result-recorder.ts; this file turns
// them into Temporal commands.
import {
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  continueAsNew,
  executeChild,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { RETRY_POLICIES } from '../contract/failures';
import {
  pauseSignal,
  progressQuery,
  promptBlockedSignal,
  promptRateLimitedSignal,
  resumeSignal,
  resumeUpdate,
  setConcurrencyUpdate,
  unblockSignal,
} from '../contract/messages';
import { BatchIdAttr, StateAttr } from '../contract/search-attributes';
import {
  rowFields,
  type BatchInput,
  type BatchResult,
  type PromptResult,
  type PromptRow,
} from '../contract/types';
import { BatchState } from './batch-state';
import { promptWorkflow } from './prompt';
import { progressMarkdown } from './progress-details';
import { ResultRecorder } from './result-recorder';

export function promptWorkflowId(batchId: string, rowId: string): string {
  return `${batchId}/${rowId}`;
}

const setState = (state: string) => upsertSearchAttributes([{ key: StateAttr, value: state }]);

export async function batchWorkflow(input: BatchInput): Promise<BatchResult> {
  const { batchId, options, totalRows } = input;
  // Short timeouts: a call on a crashed worker is retried elsewhere after this long, not after minutes.
  const { readRows, recordResults } = proxyActivities<Activities>({
    startToCloseTimeout: options.activityTimeoutMs,
    retry: RETRY_POLICIES.batch,
  });
  const state = new BatchState(input, Date.now(), {
    setState,
    unblock: (rowId) =>
      void getExternalWorkflowHandle(promptWorkflowId(batchId, rowId))
        .signal(unblockSignal)
        .catch(() => undefined), // the prompt already ended: nothing to unblock
  });
  setHandlers(state);
  const deadlineMs = state.untilDeadline(Date.now());
  if (deadlineMs !== undefined) {
    sleep(deadlineMs, { summary: 'batch deadline: no new submissions after this' }).then(
      () => state.deadlinePassed(),
      () => undefined, // cancelled with the run
    );
  }
  // Runs started before grouping record after every prompt (no patch marker).
  const recorder = new ResultRecorder(
    (results, summary) =>
      recordResults.executeWithOptions({ summary }, [{ batchId, outDir: options.outDir, results }]),
    {
      grouped: patched('record-results-in-groups'),
      inFlight: () => state.inFlight.size,
      onRecorded: (path) => void (state.manifestPath = path),
      changed: () => state.changed(),
    },
  );

  const start = (row: PromptRow) => {
    state.started(row.id);
    startPrompt(input, row).then(finished, (err: unknown) =>
      finished({
        ...rowFields(row),
        status: 'failed',
        errorCode: 'workflow_failed',
        errorMessage: err instanceof Error ? err.message : String(err),
        attempts: 0,
        polls: 0,
        finishedAt: new Date().toISOString(),
      }),
    );
  };
  const finished = (result: PromptResult) => {
    state.finished(result);
    recorder.add(result);
    state.changed();
  };

  try {
    await runPrompts(input, state, start, (offset) =>
      readRows.executeWithOptions(
        { summary: `read rows ${offset + 1}-${Math.min(totalRows, offset + options.pageSize)}` },
        [{ csvPath: input.csvPath, csvSha256: input.csvSha256, offset, limit: options.pageSize }],
      ),
    );
  } catch (err) {
    if (!isCancellation(err)) throw err;
    // Cancelled: keep partial results. In-flight prompts report their cancellation (with any job id),
    // and everything finished is recorded before the batch ends as cancelled.
    await CancellationScope.nonCancellable(async () => {
      setState('cancelled');
      await condition(() => state.inFlight.size === 0, '1 minute');
      await condition(() => !recorder.busy);
      await recorder.recordRest('record rows finished before the cancellation');
    });
    throw err;
  }
  recorder.flush(true);
  await condition(() => recorder.idle);

  if (!state.allStarted()) {
    return continueAsNew<typeof batchWorkflow>({ ...input, carry: state.carry() });
  }
  setState(state.stoppedReason ? 'stopped' : 'completed');
  setCurrentDetails(progressMarkdown(state.progress(Date.now())));
  return state.result();
}

/** Queries, signals and updates of the batch: each one a method of its state. */
function setHandlers(state: BatchState): void {
  setHandler(progressQuery, () => state.progress(Date.now()));
  setHandler(pauseSignal, (reason) => state.pause(reason));
  setHandler(resumeSignal, () => state.resume());
  setHandler(resumeUpdate, () => {
    state.resume();
    return state.progress(Date.now());
  });
  setHandler(
    setConcurrencyUpdate,
    (n) => {
      state.setConcurrency(n);
      return state.progress(Date.now());
    },
    { validator: (n: number) => BatchState.checkConcurrency(n) },
  );
  setHandler(promptBlockedSignal, ({ rowId, reason }) => state.promptBlocked(rowId, reason));
  setHandler(promptRateLimitedSignal, ({ rowId, untilMs }) => state.promptRateLimited(rowId, untilMs));
}

/** One row's prompt workflow, a child of the batch with id `<batch-id>/<row-id>`. */
function startPrompt(input: BatchInput, row: PromptRow) {
  const { batchId, options } = input;
  return executeChild(promptWorkflow, {
    workflowId: promptWorkflowId(batchId, row.id),
    args: [
      {
        batchId,
        row,
        poll: options.poll,
        jobDeadlineMs: options.jobDeadlineMs,
        activityTimeoutMs: options.activityTimeoutMs,
        ...(options.downloadDir ? { downloadDir: options.downloadDir } : {}),
      },
    ],
    typedSearchAttributes: [
      { key: BatchIdAttr, value: batchId },
      { key: StateAttr, value: 'submitting' },
    ],
    staticSummary: `Row ${row.id} (line ${row.line}) of ${batchId}`,
    staticDetails: `**Prompt:** ${row.prompt.slice(0, 500)}\n\n**Model:** ${row.model} · ${JSON.stringify(row.parameters)}`,
  });
}

/**
 * The main loop of a run: reads pages of rows and starts their prompts while the window, the pause, the
 * guard rails and the 429 gate allow, until this run has started all it should and its prompts are done.
 */
async function runPrompts(
  input: BatchInput,
  state: BatchState,
  start: (row: PromptRow) => void,
  readPage: (offset: number) => Promise<PromptRow[]>,
): Promise<void> {
  const { totalRows } = input;
  let buffer: PromptRow[] = [];
  let readOffset = state.nextRow;
  const runFull = () => state.runFull(workflowInfo().continueAsNewSuggested);
  const canStart = () => state.canStart(buffer.length, runFull());
  for (;;) {
    setCurrentDetails(progressMarkdown(state.progress(Date.now())));
    if (canStart() && state.gateHeld(Date.now())) {
      await sleep(state.gateUntil - Date.now(), {
        summary: 'rate limited: holding new submissions for Retry-After',
      });
      continue;
    }
    if (buffer.length === 0 && readOffset < totalRows && !runFull() && !state.stoppedReason) {
      buffer = await readPage(readOffset);
      if (buffer.length === 0)
        throw ApplicationFailure.nonRetryable(
          `${input.csvPath} has fewer rows than the ${totalRows} validated`,
        );
      readOffset += buffer.length;
      continue;
    }
    if (canStart()) {
      start(buffer.shift()!);
      continue;
    }
    if (state.inFlight.size === 0 && (runFull() || state.allStarted())) break;
    const seen = state.tick;
    await condition(() => state.tick !== seen);
  }
}
