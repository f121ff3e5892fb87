// The batch: reads rows page by page (through an activity), keeps `concurrency` prompt workflows in flight,
// records finished prompts in groups, and continues as new after starting `promptsPerRun` prompts so that
// every run's history stays small; the window slides across runs (prompts report their end by signal). A 429
// holds back new submissions for the whole batch; a 401/403 pauses it until an operator resumes it. The rules are in batch-state.ts and result-recorder.ts; this file turns
// them into Temporal commands.
import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  continueAsNew,
  getExternalWorkflowHandle,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { FailureType, READ_ROWS_START_TO_CLOSE_MS, RETRY_POLICIES } from '../contract/failures';
import {
  pauseSignal,
  progressQuery,
  promptBlockedSignal,
  promptFinishedSignal,
  promptSubmitOutcomeSignal,
  resumeSignal,
  resumeUpdate,
  setConcurrencyUpdate,
  unblockSignal,
} from '../contract/messages';
import { StateAttr } from '../contract/search-attributes';
import {
  MAX_RESULT_GROUP_BYTES,
  type BatchCarry,
  type BatchInput,
  type BatchResult,
} from '../contract/batch';
import {
  isContentRefusal,
  promptWorkflowId,
  workflowFailedResult,
  type PromptResult,
} from '../contract/prompt';
import { MAX_PAGE_BYTES, rowFields, type PageRow, type PriorOutcome } from '../contract/rows';
import { batchNotices, type Notify } from './batch-notices';
import { BatchState } from './batch-state';
import { cancelPrompts, startPrompt, watchCarried } from './prompt-children';
import { SUBMIT_UNKNOWN_CODE } from './prompt-state';
import { progressMarkdown } from './progress-details';
import { ResultRecorder } from './result-recorder';

const setState = (state: string) => upsertSearchAttributes([{ key: StateAttr, value: state }]);

export async function batchWorkflow(input: BatchInput): Promise<BatchResult> {
  const { batchId, options, totalRows } = input;
  // Short timeouts: a call on a crashed worker is retried elsewhere after this long, not after minutes. The
  // retries are bounded: when they run out the batch pauses with the reason and tries again on resume.
  const { recordResults, endedPrompts } = proxyActivities<Activities>({
    startToCloseTimeout: options.activityTimeoutMs,
    retry: RETRY_POLICIES.batch,
  });
  const { readRows } = proxyActivities<Activities>({
    startToCloseTimeout: Math.max(READ_ROWS_START_TO_CLOSE_MS, options.activityTimeoutMs),
    heartbeatTimeout: options.activityTimeoutMs,
    retry: RETRY_POLICIES.batch,
  });
  // Commands still on their way (child starts, signals to prompts): a run continues as new only without any.
  const pending = { starts: 0, signals: 0 };
  // The recorder is made below; a resume signal may come before it exists.
  const late: { recorder?: ResultRecorder; notify?: Notify } = {};
  const state = new BatchState(input, Date.now(), {
    // A pause a person must act on: its notice, started at once (the main loop does not wait for it).
    needsPerson: (pauseKind, reason, n) => void late.notify?.('paused', { reason, pauseKind, n }),
    setState,
    unblock: (rowId) => {
      pending.signals += 1;
      getExternalWorkflowHandle(promptWorkflowId(batchId, rowId))
        .signal(unblockSignal)
        .catch(() => undefined) // the prompt already ended: nothing to unblock
        .finally(() => {
          pending.signals -= 1;
          state.changed();
        });
    },
    // Rows that could not be recorded go again once the cause was fixed.
    resumed: () => late.recorder?.retry(),
    timer: (ms, fire) =>
      void sleep(ms, { summary: 'capacity gate: a submission slot opens' }).then(
        fire,
        () => undefined, // cancelled with the run
      ),
  });
  const notify = (late.notify = batchNotices(input, state, pending));
  state.enableCapacityGate(Date.now());
  const deadlineMs = state.untilDeadline(Date.now());
  if (deadlineMs !== undefined) {
    sleep(deadlineMs, { summary: 'batch deadline: no new submissions after this' }).then(
      () => state.deadlinePassed(),
      () => undefined, // cancelled with the run
    );
  }
  // Finished rows reach the manifest within a few seconds whatever else happens (a timer); a group that
  // cannot be recorded pauses the batch with the reason.
  const recorder = new ResultRecorder(
    (results, summary) =>
      recordResults.executeWithOptions({ summary }, [{ batchId, outDir: options.outDir, results }]),
    {
      inFlight: () => state.inFlight.size,
      onRecorded: (path) => void (state.manifestPath = path),
      changed: () => state.changed(),
      maxGroupBytes: MAX_RESULT_GROUP_BYTES,
      timer: (ms: number) => sleep(ms, { summary: 'write finished rows to the manifest' }),
      failed: (message: string) => {
        state.recordingFailed(message);
        setCurrentDetails(progressMarkdown(state.progress(Date.now())));
      },
    },
  );
  late.recorder = recorder;
  for (const result of input.carry?.window.results ?? []) recorder.add(result);

  /** A row ended: recorded once, however the batch heard of it (the prompt's signal, its child result, a check). */
  const finished = (result: PromptResult) => {
    if (!state.inFlight.has(result.rowId)) return;
    state.finished(result);
    recorder.add(result);
    state.changed();
  };
  setHandlers(state, finished);
  watchCarried(
    input,
    (rowIds) =>
      endedPrompts.executeWithOptions({ summary: `look at ${rowIds.length} prompts of earlier runs` }, [
        { batchId, rowIds },
      ]),
    state,
    finished,
  );

  const start = ({ prior, ...row }: PageRow) => {
    if (prior?.reused) {
      // Another batch in the output root kept a video for this very request: recorded from its job, no cost.
      state.reuse(prior.reused);
      recorder.add(prior.reused);
      return;
    }
    if (prior?.status === 'succeeded') {
      // An earlier run of this batch recorded it as succeeded: counted, not submitted, not recorded again.
      state.skip(prior);
      return;
    }
    if (keptUnknown(input, prior)) {
      // Its outcome stayed unknown (it may be billed): only `retry-failed --code submit_unknown` re-sends it.
      state.skipUnknown(prior!);
      return;
    }
    if (!input.retryOf && prior?.status === 'failed' && isContentRefusal(prior.errorCode)) {
      // The gateway refused its content: sent again unchanged it would be refused again, and may be billed.
      // Only `retry-failed --code <its code>` re-sends it, deliberately.
      state.skipRefused(prior);
      return;
    }
    state.started(row.id, prior);
    const failedNow = (err: unknown) =>
      finished(
        workflowFailedResult(
          rowFields(row),
          err instanceof Error ? err.message : String(err),
          new Date().toISOString(),
        ),
      );
    pending.starts += 1;
    // Outside the run's cancellation: a cancel of the batch asks each prompt itself, and waits for its end.
    CancellationScope.nonCancellable(() => startPrompt(input, row, prior)).then(
      (child) => {
        pending.starts -= 1;
        state.changed();
        // The prompt's own signal normally comes first; this run also hears of an end without one.
        child.result().then(finished, failedNow);
      },
      (err: unknown) => {
        pending.starts -= 1;
        failedNow(err);
      },
    );
  };

  let carry: BatchCarry | undefined;
  try {
    const readPage = (offset: number) =>
      readRows.executeWithOptions(
        { summary: `read rows ${offset + 1}-${Math.min(totalRows, offset + options.pageSize)}` },
        [
          {
            csvPath: input.csvPath,
            csvSha256: input.csvSha256,
            offset,
            limit: options.pageSize,
            batchId,
            maxBytes: MAX_PAGE_BYTES,
            ...(options.outDir ? { outDir: options.outDir } : {}),
            ...(input.priorOutDir ? { priorOutDir: input.priorOutDir } : {}),
            ...(options.reuse ? { reuse: true } : {}),
            ...(options.download ? { download: true } : {}),
            ...(options.downloadDir ? { downloadDir: options.downloadDir } : {}),
            // A strict batch verifies the videos it reuses from other batches itself.
            ...(options.verify === 'strict' ? { verify: options.verify } : {}),
            // Request keys of rewritten rows name the rewrite's settings (input/request-key.ts).
            ...(options.enhance ? { enhance: options.enhance } : {}),
          },
        ],
      );
    if ((await runPrompts(input, state, start, pauseWhileUnreadable(state, readPage))) === 'continue')
      carry = await handOver(state, recorder, pending);
  } catch (err) {
    if (!isCancellation(err)) {
      await notify('failed', { reason: err instanceof Error ? err.message : String(err) });
      throw err;
    }
    // Cancelled: keep partial results. Prompts outlive the run that started them, so each one in flight is
    // asked to cancel; each reports its end (a submit in flight finishes, so its job id is kept), and
    // everything finished is recorded before the batch ends as cancelled.
    await CancellationScope.nonCancellable(async () => {
      setState('cancelled');
      await condition(() => pending.starts === 0);
      await cancelPrompts(batchId, [...state.inFlight]);
      await condition(() => state.inFlight.size === 0);
      await condition(() => !recorder.busy);
      await recorder.recordRest('record rows finished before the cancellation');
      await notify('cancelled');
    });
    throw err;
  }
  if (carry) return continueAsNew<typeof batchWorkflow>({ ...input, carry });
  recorder.flush(true);
  await condition(() => recorder.idle);
  setState(state.stoppedReason ? 'stopped' : 'completed');
  await notify(state.stoppedReason ? 'stopped' : 'completed', {
    ...(state.stoppedReason ? { reason: state.stoppedReason } : {}),
  });
  setCurrentDetails(progressMarkdown(state.progress(Date.now())));
  return state.result();
}

/**
 * What the next run takes over: the window slides on (the prompts in flight report to the next run), with
 * what is not recorded yet (at most one group). Waits for child starts and signals still on their way.
 */
async function handOver(
  state: BatchState,
  recorder: ResultRecorder,
  pending: { starts: number; signals: number },
): Promise<BatchCarry> {
  for (;;) {
    await condition(
      () => pending.starts === 0 && pending.signals === 0 && !recorder.busy && allHandlersFinished(),
    );
    const results = recorder.handOver();
    if (results) return state.carry(results);
    // A group is being recorded now, or recording failed and waits for the batch to be resumed.
    await condition(() => recorder.busy || !recorder.failing);
  }
}

/** Queries, signals and updates of the batch: each one a method of its state (a prompt's end: `finished`). */
function setHandlers(state: BatchState, finished: (result: PromptResult) => void): void {
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
  setHandler(promptFinishedSignal, finished);
  setHandler(promptSubmitOutcomeSignal, (report) => {
    state.submitOutcome(report, Date.now());
    setCurrentDetails(progressMarkdown(state.progress(Date.now())));
  });
}

/**
 * A row an earlier run of this batch ended as `submit_unknown` with no job id: a re-run does not send it again
 * (it may have been billed already); `retry-failed --code submit_unknown` does, deliberately. Neither is any
 * other row without a job whose earlier submits had unknown outcomes (e.g. cancelled while one was on the
 * wire) once another submit would break the policy's bound of 1 + --max-unknown-resends jobs (`fail`: 1);
 * `retry-failed --code <its code>` re-sends it, deliberately.
 */
function keptUnknown(input: BatchInput, prior: PriorOutcome | undefined): boolean {
  if (input.retryOf || !prior || prior.jobId || prior.status === 'succeeded') return false;
  if (prior.status === 'failed' && prior.errorCode === SUBMIT_UNKNOWN_CODE) return true;
  if (!prior.unknownSubmits) return false;
  const { onUnknownSubmit, maxUnknownResends } = input.options;
  return onUnknownSubmit === 'fail' || prior.unknownSubmits > maxUnknownResends;
}

/**
 * A page read that pauses the batch while its CSV differs from the file it started from (the reason says so),
 * and reads again once the batch is resumed. Any read that fails for good (e.g. a path no worker may read)
 * pauses the same way instead of failing the batch. Null: nothing to read now (a guard rail stopped the
 * batch).
 */
function pauseWhileUnreadable(
  state: BatchState,
  readPage: (offset: number) => Promise<PageRow[]>,
): (offset: number) => Promise<PageRow[] | null> {
  return async (offset) => {
    for (;;) {
      try {
        return await readPage(offset);
      } catch (err) {
        const cause = err instanceof ActivityFailure ? err.cause : undefined;
        const csvChanged = cause instanceof ApplicationFailure && cause.type === FailureType.CsvChanged;
        if (!(err instanceof ActivityFailure)) throw err;
        if (csvChanged) state.pause(cause.message, 'input');
        else
          state.inputFailed(
            `rows from ${offset + 1} could not be read (${cause?.message ?? (err as Error).message}); fix it, then resume the batch`,
          );
        setCurrentDetails(progressMarkdown(state.progress(Date.now())));
        await condition(() => !state.pausedReason || state.stoppedReason !== null);
        if (state.stoppedReason) return null;
      }
    }
  };
}

/**
 * The main loop of a run: reads pages of rows and starts their prompts while the window, the pause, the
 * guard rails and the 429 gate allow. Ends `done` once every row was started (or a guard rail stopped the
 * batch) and no prompt is in flight, or `continue` once this run has started all it should and rows remain
 * (or the server suggests continuing as new): the prompts in flight then go on under the next run.
 */
async function runPrompts(
  input: BatchInput,
  state: BatchState,
  start: (row: PageRow) => void,
  readPage: (offset: number) => Promise<PageRow[] | null>,
): Promise<'done' | 'continue'> {
  const { totalRows } = input;
  let buffer: PageRow[] = [];
  let readOffset = state.nextRow;
  const runFull = () => state.runFull(workflowInfo().continueAsNewSuggested);
  const canStart = () => state.canStart(buffer.length, runFull());
  for (;;) {
    setCurrentDetails(progressMarkdown(state.progress(Date.now())));
    if (state.allStarted() && state.inFlight.size === 0) return 'done';
    if (workflowInfo().continueAsNewSuggested || (runFull() && !state.allStarted())) return 'continue';
    if (canStart() && state.gateHeld(Date.now())) {
      await sleep(state.gateUntil - Date.now(), {
        summary: 'rate limited: holding new submissions for Retry-After',
      });
      continue;
    }
    if (buffer.length === 0 && readOffset < totalRows && !state.stoppedReason) {
      const page = await readPage(readOffset);
      if (page === null) continue;
      buffer = page;
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
    const seen = state.tick;
    await condition(() => state.tick !== seen);
  }
}
