// One prompt: submit once, then poll by activity retries (durable server-side timers, no history events
// per poll) until the job is terminal or its deadline passes. Never pays twice: the job id is in history as
// soon as the submit activity returns, and every later step only polls that job.
import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  isCancellation,
  getExternalWorkflowHandle,
  proxyActivities,
  setHandler,
  sleep,
  TimeoutFailure,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { DEFAULT_RETRY_AFTER_MS, FailureType, RETRY_POLICIES } from '../contract/failures';
import { promptBlockedSignal, promptRateLimitedSignal, unblockSignal } from '../contract/messages';
import { StateAttr } from '../contract/search-attributes';
import {
  rowFields,
  type PollOutcome,
  type PromptInput,
  type PromptResult,
  type SubmitResult,
} from '../contract/types';

function applicationFailure(err: unknown): ApplicationFailure | undefined {
  return err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? err.cause : undefined;
}

function failureCode(failure: ApplicationFailure | undefined, fallback: string): string {
  const details = failure?.details?.[0] as { code?: string } | undefined;
  return details?.code ?? fallback;
}

export async function promptWorkflow(input: PromptInput): Promise<PromptResult> {
  const { row, batchId, poll } = input;
  const { submitJob } = proxyActivities<Activities>({
    startToCloseTimeout: input.activityTimeoutMs,
    retry: RETRY_POLICIES.submitJob,
  });

  const parent = workflowInfo().parent;
  const batch = parent ? getExternalWorkflowHandle(parent.workflowId) : undefined;
  let unblocked = false;
  setHandler(unblockSignal, () => void (unblocked = true));
  let pausedMs = 0;

  const base = rowFields(row);
  const finish = (rest: Omit<PromptResult, keyof typeof base | 'finishedAt'>): PromptResult => {
    upsertSearchAttributes([{ key: StateAttr, value: rest.status }]);
    return { ...base, ...rest, finishedAt: new Date().toISOString() };
  };

  /** 401/403: tell the batch (it pauses) and wait until it says the key was fixed. */
  const waitForUnblock = async (failure: ApplicationFailure) => {
    const since = Date.now();
    unblocked = false;
    upsertSearchAttributes([{ key: StateAttr, value: 'blocked' }]);
    if (batch) await batch.signal(promptBlockedSignal, { rowId: row.id, reason: failure.message });
    await condition(() => unblocked);
    pausedMs += Date.now() - since;
  };

  let submitted: SubmitResult | undefined;
  let rateLimits = 0;
  while (!submitted) {
    try {
      submitted = await submitJob.executeWithOptions({ summary: `submit row ${row.id}` }, [{ batchId, row }]);
    } catch (err) {
      if (isCancellation(err)) {
        return finish({
          status: 'failed',
          attempts: 1 + rateLimits,
          polls: 0,
          errorCode: 'cancelled',
          errorMessage: 'the batch was cancelled before this row was submitted',
        });
      }
      const failure = applicationFailure(err);
      if (failure?.type === FailureType.RateLimited) {
        const { retryAfterMs } = (failure.details?.[0] ?? { retryAfterMs: DEFAULT_RETRY_AFTER_MS }) as {
          retryAfterMs: number;
        };
        if (batch)
          await batch.signal(promptRateLimitedSignal, { rowId: row.id, untilMs: Date.now() + retryAfterMs });
        rateLimits += 1;
        await sleep(retryAfterMs, {
          summary: `429: waiting ${Math.ceil(retryAfterMs / 1000)} s as Retry-After asked`,
        });
      } else if (failure?.type === FailureType.Unauthorized || failure?.type === FailureType.Forbidden) {
        await waitForUnblock(failure);
      } else {
        return finish({
          status: 'failed',
          attempts: 1 + rateLimits,
          polls: 0,
          errorCode: failureCode(failure, 'submit_failed'),
          errorMessage: failure?.message ?? String(err),
        });
      }
    }
  }
  upsertSearchAttributes([{ key: StateAttr, value: 'running' }]);
  const attempts = submitted.attempts + rateLimits;
  const common = {
    jobId: submitted.jobId,
    attempts,
    submittedAt: new Date(submitted.submittedAt).toISOString(),
  };

  const deadlinePassed = () =>
    finish({
      ...common,
      status: 'failed',
      polls: 0,
      errorCode: 'deadline_exceeded',
      errorMessage: `job ${submitted.jobId} did not finish within ${Math.round(input.jobDeadlineMs / 1000)} s`,
    });

  for (;;) {
    const remaining = submitted.submittedAt + input.jobDeadlineMs + pausedMs - Date.now();
    if (remaining <= 0) return deadlinePassed();
    const { pollJob } = proxyActivities<Activities>({
      startToCloseTimeout: input.activityTimeoutMs,
      scheduleToCloseTimeout: remaining,
      retry: RETRY_POLICIES.pollJob(poll.intervalMs),
    });
    let outcome: PollOutcome;
    try {
      outcome = await pollJob.executeWithOptions({ summary: `poll job ${submitted.jobId}` }, [
        { jobId: submitted.jobId, submittedAt: submitted.submittedAt, poll },
      ]);
    } catch (err) {
      if (isCancellation(err)) {
        return finish({
          ...common,
          status: 'failed',
          polls: 0,
          errorCode: 'cancelled',
          errorMessage: `the batch was cancelled; job ${submitted.jobId} was submitted and may still finish at the gateway`,
        });
      }
      // The deadline (schedule-to-close) can pass during an attempt (TimeoutFailure) or while waiting for the
      // next one (retry state TIMEOUT, with the last attempt's failure as cause).
      if (
        err instanceof ActivityFailure &&
        (err.cause instanceof TimeoutFailure || err.retryState === 'TIMEOUT')
      ) {
        return deadlinePassed();
      }
      const failure = applicationFailure(err);
      if (failure?.type === FailureType.Unauthorized || failure?.type === FailureType.Forbidden) {
        await waitForUnblock(failure);
        continue;
      }
      return finish({
        ...common,
        status: 'failed',
        polls: 0,
        errorCode: failureCode(failure, 'poll_failed'),
        errorMessage: failure?.message ?? String(err),
      });
    }
    if (outcome.status === 'succeeded' && outcome.url && input.downloadDir) {
      return finish({ ...common, ...outcome, ...(await download(input, outcome.url)) });
    }
    return finish({ ...common, ...outcome });
  }
}

/** Fetches the finished video right away (result URLs expire at many providers); a failure is recorded, not fatal. */
async function download(input: PromptInput, url: string): Promise<Partial<PromptResult>> {
  const { downloadVideo } = proxyActivities<Activities>({
    startToCloseTimeout: '10m',
    retry: RETRY_POLICIES.downloadVideo,
  });
  try {
    return await downloadVideo.executeWithOptions({ summary: `download ${input.row.id}.mp4` }, [
      { url, dir: input.downloadDir!, name: `${input.row.id}.mp4` },
    ]);
  } catch (err) {
    const failure = applicationFailure(err);
    return { downloadError: failure?.message ?? String(err) };
  }
}
