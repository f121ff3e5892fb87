// The batch: reads rows page by page (through an activity), keeps at most `concurrency` prompt workflows in
// flight, records finished prompts in groups, and continues as new after `promptsPerRun` prompts so that
// every run's history stays small. A 429 holds back new submissions for the whole batch; a 401/403 pauses
// it until an operator resumes it.
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
  type BatchCarry,
  type BatchInput,
  type BatchProgress,
  type BatchResult,
  type PromptResult,
  type PromptRow,
} from '../contract/types';
import { promptWorkflow } from './prompt';
import { progressMarkdown } from './progress-details';

const RESULT_GROUP = 25;
const RESULT_GROUP_MS = 10_000;

export function promptWorkflowId(batchId: string, rowId: string): string {
  return `${batchId}/${rowId}`;
}

export async function batchWorkflow(input: BatchInput): Promise<BatchResult> {
  const { batchId, options, totalRows } = input;
  // Short timeouts: a call on a crashed worker is retried elsewhere after this long, not after minutes.
  const { readRows, recordResults } = proxyActivities<Activities>({
    startToCloseTimeout: options.activityTimeoutMs,
    retry: RETRY_POLICIES.batch,
  });
  const carry: BatchCarry = input.carry ?? {
    nextRow: 0,
    counts: { succeeded: 0, failed: 0 },
    startedAt: Date.now(),
    concurrency: options.concurrency,
    pausedReason: null,
    gateUntil: 0,
    manifestPath: '',
    runs: 0,
  };
  let { nextRow, concurrency, pausedReason, gateUntil, manifestPath } = carry;
  let stoppedReason = carry.stoppedReason ?? null;
  const counts = { ...carry.counts };
  let buffer: PromptRow[] = [];
  let readOffset = nextRow;
  let startedThisRun = 0;
  const inFlight = new Set<string>();
  const blocked = new Set<string>();
  const rateLimited = new Map<string, number>();
  let pending: PromptResult[] = [];
  let recording = false;
  // Every state change bumps the tick; the main loop sleeps until it moves.
  let tick = 0;
  const changed = () => void (tick += 1);

  const progress = (): BatchProgress => ({
    batchId,
    total: totalRows,
    started: nextRow,
    inFlight: inFlight.size,
    succeeded: counts.succeeded,
    failed: counts.failed,
    rateLimited: [...rateLimited.values()].filter((until) => until > Date.now()).length,
    rateLimitedUntil: gateUntil > Date.now() ? gateUntil : null,
    pausedReason,
    blocked: blocked.size,
    concurrency,
    startedAt: carry.startedAt,
    done: counts.succeeded + counts.failed >= totalRows,
    manifestPath,
    stoppedReason,
  });
  const setState = (state: string) => upsertSearchAttributes([{ key: StateAttr, value: state }]);

  const resume = () => {
    pausedReason = null;
    for (const rowId of blocked) {
      getExternalWorkflowHandle(promptWorkflowId(batchId, rowId))
        .signal(unblockSignal)
        .catch(() => undefined); // the prompt already ended: nothing to unblock
    }
    blocked.clear();
    setState('running');
    changed();
  };
  setHandler(progressQuery, progress);
  setHandler(pauseSignal, (reason) => {
    pausedReason = reason || 'paused by operator';
    setState('paused');
    changed();
  });
  setHandler(resumeSignal, resume);
  setHandler(resumeUpdate, () => {
    resume();
    return progress();
  });
  setHandler(
    setConcurrencyUpdate,
    (n) => {
      concurrency = n;
      changed();
      return progress();
    },
    {
      validator: (n) => {
        if (!Number.isInteger(n) || n < 1 || n > 10_000)
          throw new Error('concurrency must be a whole number from 1 to 10000');
      },
    },
  );
  setHandler(promptBlockedSignal, ({ rowId, reason }) => {
    if (!inFlight.has(rowId)) return;
    blocked.add(rowId);
    if (!pausedReason) setState('paused');
    pausedReason = `the gateway refused the API key (${reason}); fix the key, then resume the batch`;
    changed();
  });
  setHandler(promptRateLimitedSignal, ({ rowId, untilMs }) => {
    gateUntil = Math.max(gateUntil, untilMs);
    rateLimited.set(rowId, untilMs);
    changed();
  });

  /** Guard rails: once crossed, no new submissions; prompts in flight finish; the batch ends cleanly. */
  const stop = (reason: string) => {
    if (stoppedReason) return;
    stoppedReason = reason;
    setState('stopped');
    changed();
  };
  const checkGuardRails = () => {
    const finishedRows = counts.succeeded + counts.failed;
    if (options.maxFailures !== undefined && counts.failed >= options.maxFailures) {
      stop(`${counts.failed} rows failed (--max-failures ${options.maxFailures})`);
    } else if (
      options.maxFailureRate !== undefined &&
      finishedRows >= 10 &&
      counts.failed / finishedRows > options.maxFailureRate
    ) {
      stop(
        `${counts.failed} of ${finishedRows} finished rows failed (--max-failure-rate ${options.maxFailureRate})`,
      );
    } else if (
      options.maxSubmissions !== undefined &&
      nextRow >= options.maxSubmissions &&
      nextRow < totalRows
    ) {
      stop(`${nextRow} jobs submitted (--max-submissions ${options.maxSubmissions})`);
    }
  };
  if (options.deadlineAt !== undefined && !stoppedReason) {
    const left = options.deadlineAt - Date.now();
    if (left <= 0) stop('the batch deadline passed');
    else {
      sleep(left, { summary: 'batch deadline: no new submissions after this' }).then(
        () => stop('the batch deadline passed'),
        () => undefined, // cancelled with the run
      );
    }
  }

  // Results are recorded in groups: at most every RESULT_GROUP_MS or RESULT_GROUP rows, and at once when
  // nothing else is in flight. Runs started before this change record after every prompt (no patch marker).
  const groupResults = patched('record-results-in-groups');
  let lastFlushAt = Date.now();
  const flushDue = () =>
    !groupResults ||
    pending.length >= RESULT_GROUP ||
    Date.now() - lastFlushAt >= RESULT_GROUP_MS ||
    inFlight.size === 0;
  const flush = (force = false) => {
    if (recording || pending.length === 0 || (!force && !flushDue())) return;
    const group = pending;
    pending = [];
    recording = true;
    lastFlushAt = Date.now();
    recordResults
      .executeWithOptions({ summary: `record ${group.length} finished rows` }, [
        { batchId, outDir: options.outDir, results: group },
      ])
      .then(
        (r) => {
          manifestPath = r.manifestPath;
          recording = false;
          flush();
          changed();
        },
        () => {
          pending = group.concat(pending);
          recording = false;
          changed();
        },
      );
  };

  const finished = (result: PromptResult) => {
    inFlight.delete(result.rowId);
    blocked.delete(result.rowId);
    rateLimited.delete(result.rowId);
    counts[result.status] += 1;
    checkGuardRails();
    pending.push(result);
    flush();
    changed();
  };

  const start = (row: PromptRow) => {
    inFlight.add(row.id);
    nextRow += 1;
    startedThisRun += 1;
    checkGuardRails();
    executeChild(promptWorkflow, {
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
    }).then(finished, (err: unknown) =>
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

  const runFull = () => startedThisRun >= options.promptsPerRun || workflowInfo().continueAsNewSuggested;
  const canStart = () =>
    buffer.length > 0 && !runFull() && !pausedReason && !stoppedReason && inFlight.size < concurrency;
  const allStarted = () => nextRow >= totalRows || stoppedReason !== null;

  try {
    for (;;) {
      setCurrentDetails(progressMarkdown(progress()));
      if (canStart() && gateUntil > Date.now()) {
        await sleep(gateUntil - Date.now(), {
          summary: 'rate limited: holding new submissions for Retry-After',
        });
        continue;
      }
      if (buffer.length === 0 && readOffset < totalRows && !runFull() && !stoppedReason) {
        buffer = await readRows.executeWithOptions(
          { summary: `read rows ${readOffset + 1}-${Math.min(totalRows, readOffset + options.pageSize)}` },
          [
            {
              csvPath: input.csvPath,
              csvSha256: input.csvSha256,
              offset: readOffset,
              limit: options.pageSize,
            },
          ],
        );
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
      if (inFlight.size === 0 && (runFull() || allStarted())) break;
      const seen = tick;
      await condition(() => tick !== seen);
    }
  } catch (err) {
    if (!isCancellation(err)) throw err;
    // Cancelled: keep partial results. In-flight prompts report their cancellation (with any job id),
    // and everything finished is recorded before the batch ends as cancelled.
    await CancellationScope.nonCancellable(async () => {
      setState('cancelled');
      await condition(() => inFlight.size === 0, '1 minute');
      await condition(() => !recording);
      if (pending.length)
        await recordResults.executeWithOptions({ summary: 'record rows finished before the cancellation' }, [
          { batchId, outDir: options.outDir, results: pending.splice(0) },
        ]);
    });
    throw err;
  }
  flush(true);
  await condition(() => !recording && pending.length === 0);

  if (!allStarted()) {
    return continueAsNew<typeof batchWorkflow>({
      ...input,
      carry: {
        nextRow,
        counts,
        startedAt: carry.startedAt,
        concurrency,
        pausedReason,
        gateUntil,
        manifestPath,
        runs: carry.runs + 1,
        stoppedReason,
      },
    });
  }
  setState(stoppedReason ? 'stopped' : 'completed');
  setCurrentDetails(progressMarkdown(progress()));
  return {
    batchId,
    total: totalRows,
    succeeded: counts.succeeded,
    failed: counts.failed,
    manifestPath,
    notStarted: totalRows - nextRow,
    ...(stoppedReason ? { stoppedReason } : {}),
  };
}
