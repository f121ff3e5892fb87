// The batch: reads rows page by page (through an activity), keeps at most `concurrency` prompt workflows in
// flight, records finished prompts in groups, and continues as new after `promptsPerRun` prompts so that
// every run's history stays small. A 429 holds back new submissions for the whole batch; a 401/403 pauses
// it until an operator resumes it. The rules are in batch-state.ts and result-recorder.ts; this file turns
// them into Temporal commands.
import {
  ActivityFailure,
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
import {
  FailureType,
  PATCH_CAPACITY_GATE,
  PATCH_SPEND_SAFETY,
  PATCH_UNATTENDED,
  PATCH_UNKNOWN_WHOLE_LIFE,
  RETRY_POLICIES,
} from '../contract/failures';
import {
  pauseSignal,
  progressQuery,
  promptBlockedSignal,
  promptRateLimitedSignal,
  promptSubmitOutcomeSignal,
  resumeSignal,
  resumeUpdate,
  setConcurrencyUpdate,
  unblockSignal,
} from '../contract/messages';
import { BatchIdAttr, StateAttr } from '../contract/search-attributes';
import {
  DEFAULT_MAX_UNKNOWN_RESENDS,
  DEFAULT_ON_UNKNOWN_SUBMIT,
  MAX_PAGE_BYTES,
  MAX_RESULT_GROUP_BYTES,
  promptSpendOptions,
  rowFields,
  type BatchInput,
  type BatchResult,
  type PageRow,
  type PriorOutcome,
  type PromptResult,
  type PromptRow,
} from '../contract/types';
import { BatchState } from './batch-state';
import { promptWorkflow, SUBMIT_UNKNOWN_CODE } from './prompt';
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
  // The recorder is made below; a resume signal may come before it exists.
  const late: { recorder?: ResultRecorder } = {};
  const state = new BatchState(input, Date.now(), {
    setState,
    unblock: (rowId) =>
      void getExternalWorkflowHandle(promptWorkflowId(batchId, rowId))
        .signal(unblockSignal)
        .catch(() => undefined), // the prompt already ended: nothing to unblock
    // Rows that could not be recorded go again once the cause was fixed.
    resumed: () => late.recorder?.retry(),
    timer: (ms, fire) =>
      void sleep(ms, { summary: 'capacity gate: a submission slot opens' }).then(
        fire,
        () => undefined, // cancelled with the run
      ),
  });
  setHandlers(state);
  // Issue 10 (spend safety): rows carry what earlier runs know, a re-run skips rows that succeeded and checks
  // known jobs, cancel waits for every prompt, a changed CSV pauses, pages and groups are cut by size.
  const spendSafety = patched(PATCH_SPEND_SAFETY);
  const deadlineMs = state.untilDeadline(Date.now());
  if (deadlineMs !== undefined) {
    sleep(deadlineMs, { summary: 'batch deadline: no new submissions after this' }).then(
      () => state.deadlinePassed(),
      () => undefined, // cancelled with the run
    );
  }
  // Runs started before grouping record after every prompt (no patch marker).
  const grouped = patched('record-results-in-groups');
  // Issue 17: finished rows reach the manifest within RESULT_GROUP_MS whatever else happens (a timer), the
  // batch's own activities have bounded retries and pause the batch with the reason when they run out.
  const unattended = spendSafety && patched(PATCH_UNATTENDED);
  const wholeLife = unattended && patched(PATCH_UNKNOWN_WHOLE_LIFE);
  state.countPosts = unattended;
  // Issue 18: under a gateway's running-jobs cap, prompts wait for a slot from the batch (capacity-gate.ts).
  const capacityGate = unattended && patched(PATCH_CAPACITY_GATE);
  if (capacityGate) state.enableCapacityGate();
  const bounded = proxyActivities<Activities>({
    startToCloseTimeout: options.activityTimeoutMs,
    retry: RETRY_POLICIES.batchBounded,
  });
  const record = unattended ? bounded.recordResults : recordResults;
  const read = unattended ? bounded.readRows : readRows;
  const recorder = new ResultRecorder(
    (results, summary) =>
      record.executeWithOptions({ summary }, [{ batchId, outDir: options.outDir, results }]),
    {
      grouped,
      inFlight: () => state.inFlight.size,
      onRecorded: (path) => void (state.manifestPath = path),
      changed: () => state.changed(),
      ...(spendSafety ? { maxGroupBytes: MAX_RESULT_GROUP_BYTES } : {}),
      ...(unattended
        ? {
            timer: (ms: number) => sleep(ms, { summary: 'write finished rows to the manifest' }),
            failed: (message: string) => {
              state.recordingFailed(message);
              setCurrentDetails(progressMarkdown(state.progress(Date.now())));
            },
          }
        : {}),
    },
  );
  late.recorder = recorder;

  const start = ({ prior, ...row }: PageRow) => {
    if (spendSafety && prior?.status === 'succeeded') {
      // An earlier run of this batch recorded it as succeeded: counted, not submitted, not recorded again.
      state.skip(prior);
      return;
    }
    if (unattended && keptUnknown(input, prior, wholeLife)) {
      // Its outcome stayed unknown (it may be billed): only `retry-failed --code submit_unknown` re-sends it.
      state.skipUnknown(prior!);
      return;
    }
    state.started(row.id, prior);
    startPrompt(input, row, spendSafety, prior, unattended, capacityGate).then(finished, (err: unknown) =>
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
    const readPage = (offset: number) =>
      read.executeWithOptions(
        { summary: `read rows ${offset + 1}-${Math.min(totalRows, offset + options.pageSize)}` },
        [
          {
            csvPath: input.csvPath,
            csvSha256: input.csvSha256,
            offset,
            limit: options.pageSize,
            ...(spendSafety
              ? {
                  batchId,
                  maxBytes: MAX_PAGE_BYTES,
                  ...(options.outDir ? { outDir: options.outDir } : {}),
                  ...(input.priorOutDir ? { priorOutDir: input.priorOutDir } : {}),
                }
              : {}),
          },
        ],
      );
    await runPrompts(
      input,
      state,
      start,
      spendSafety ? pauseWhileUnreadable(state, readPage, unattended) : readPage,
    );
  } catch (err) {
    if (!isCancellation(err)) throw err;
    // Cancelled: keep partial results. In-flight prompts report their cancellation (with any job id),
    // and everything finished is recorded before the batch ends as cancelled.
    await CancellationScope.nonCancellable(async () => {
      setState('cancelled');
      // Every prompt records its outcome (a submit in flight finishes, so its job id is kept); runs started
      // before the spend-safety patch waited one minute at most.
      if (spendSafety) await condition(() => state.inFlight.size === 0);
      else await condition(() => state.inFlight.size === 0, '1 minute');
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
  setHandler(promptRateLimitedSignal, ({ rowId, untilMs, reason }) =>
    state.promptRateLimited(rowId, untilMs, reason),
  );
  setHandler(promptSubmitOutcomeSignal, (report) => {
    state.submitOutcome(report, Date.now());
    setCurrentDetails(progressMarkdown(state.progress(Date.now())));
  });
}

/**
 * A row an earlier run of this batch ended as `submit_unknown` with no job id: a re-run does not send it again
 * (it may have been billed already); `retry-failed --code submit_unknown` does, deliberately. With `wholeLife`
 * (patch unknown-whole-life), neither is any other row without a job whose earlier submits had unknown
 * outcomes (e.g. cancelled while one was on the wire) once another submit would break the policy's bound of
 * 1 + --max-unknown-resends jobs (`fail`: 1); `retry-failed --code <its code>` re-sends it, deliberately.
 */
function keptUnknown(input: BatchInput, prior: PriorOutcome | undefined, wholeLife: boolean): boolean {
  if (input.retryOf || !prior || prior.jobId || prior.status === 'succeeded') return false;
  if (prior.status === 'failed' && prior.errorCode === SUBMIT_UNKNOWN_CODE) return true;
  if (!wholeLife || !prior.unknownSubmits) return false;
  const policy = input.options.onUnknownSubmit ?? DEFAULT_ON_UNKNOWN_SUBMIT;
  const resends = input.options.maxUnknownResends ?? DEFAULT_MAX_UNKNOWN_RESENDS;
  return policy === 'fail' || prior.unknownSubmits > resends;
}

/**
 * A page read that pauses the batch while its CSV differs from the file it started from (the reason says so),
 * and reads again once the batch is resumed. With `unattended`, any read that fails for good (e.g. a path no
 * worker may read) pauses the same way instead of failing the batch. Null: nothing to read now (a guard rail
 * stopped the batch).
 */
function pauseWhileUnreadable(
  state: BatchState,
  readPage: (offset: number) => Promise<PageRow[]>,
  unattended: boolean,
): (offset: number) => Promise<PageRow[] | null> {
  return async (offset) => {
    for (;;) {
      try {
        return await readPage(offset);
      } catch (err) {
        const cause = err instanceof ActivityFailure ? err.cause : undefined;
        const csvChanged = cause instanceof ApplicationFailure && cause.type === FailureType.CsvChanged;
        if (!csvChanged && !(unattended && err instanceof ActivityFailure)) throw err;
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

/** What the prompt of a row with a prior outcome needs: the job to check first, and the key generation. */
function priorArgs(prior: PriorOutcome | undefined, unattended: boolean) {
  if (!prior) return {};
  // Issue 17: a newer generation than the known job's had only unknown outcomes: reuse it, never skip it (a
  // gateway that honours keys then returns the job that generation may have made).
  if (unattended && prior.jobId && prior.generation > (prior.jobGeneration ?? prior.generation))
    return { knownJobId: prior.jobId, keyGeneration: prior.generation };
  // A known job is checked before paying again; a new submit then needs a key the gateway has not seen (it
  // would replay the failed or gone job). Without a job id the same key goes again: a gateway that honours
  // it returns the job an unknown outcome may have made.
  if (prior.jobId) return { knownJobId: prior.jobId, keyGeneration: prior.generation + 1 };
  return prior.generation > 0 ? { keyGeneration: prior.generation } : {};
}

/** One row's prompt workflow, a child of the batch with id `<batch-id>/<row-id>`. */
function startPrompt(
  input: BatchInput,
  row: PromptRow,
  spendSafety: boolean,
  prior: PriorOutcome | undefined,
  unattended: boolean,
  capacityGate: boolean,
) {
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
        ...(spendSafety ? { ...priorArgs(prior, unattended), ...promptSpendOptions(options) } : {}),
        ...(unattended && prior?.unknownSubmits ? { priorUnknownSubmits: prior.unknownSubmits } : {}),
        ...(unattended && input.retryOf ? { keyBatchId: input.retryOf } : {}),
        ...(capacityGate ? { capacityGate: true } : {}),
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
  start: (row: PageRow) => void,
  readPage: (offset: number) => Promise<PageRow[] | null>,
): Promise<void> {
  const { totalRows } = input;
  let buffer: PageRow[] = [];
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
    if (state.inFlight.size === 0 && (runFull() || state.allStarted())) break;
    const seen = state.tick;
    await condition(() => state.tick !== seen);
  }
}
