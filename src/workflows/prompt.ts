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
  type ExternalWorkflowHandle,
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
  type RowFields,
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
  const prompt = new PromptRun(input);
  const submit = await submitOnce(prompt);
  if ('failed' in submit) return submit.failed;
  upsertSearchAttributes([{ key: StateAttr, value: 'running' }]);
  return pollUntilDone(prompt, submit.submitted, submit.rateLimits);
}

/** What both phases of a prompt share: its batch, the pause it may wait on, and how it ends. */
class PromptRun {
  /** The batch that started this prompt (absent when run on its own). */
  readonly batch: ExternalWorkflowHandle | undefined;
  /** Time spent waiting for `unblock`; it does not count against the job's deadline. */
  pausedMs = 0;
  private unblocked = false;
  private readonly base: RowFields;

  constructor(readonly input: PromptInput) {
    const parent = workflowInfo().parent;
    this.batch = parent ? getExternalWorkflowHandle(parent.workflowId) : undefined;
    setHandler(unblockSignal, () => void (this.unblocked = true));
    this.base = rowFields(input.row);
  }

  finish(rest: Omit<PromptResult, keyof RowFields | 'finishedAt'>): PromptResult {
    upsertSearchAttributes([{ key: StateAttr, value: rest.status }]);
    return { ...this.base, ...rest, finishedAt: new Date().toISOString() };
  }

  /** 401/403: tell the batch (it pauses) and wait until it says the key was fixed. */
  async waitForUnblock(failure: ApplicationFailure): Promise<void> {
    const since = Date.now();
    this.unblocked = false;
    upsertSearchAttributes([{ key: StateAttr, value: 'blocked' }]);
    if (this.batch)
      await this.batch.signal(promptBlockedSignal, { rowId: this.input.row.id, reason: failure.message });
    await condition(() => this.unblocked);
    this.pausedMs += Date.now() - since;
  }
}

/**
 * Submits the row's job: transient errors are retried by Temporal with the same Idempotency-Key; a 429 tells
 * the batch and sleeps durably for Retry-After; a 401/403 waits for the batch to resume; anything else ends
 * the row as failed.
 */
async function submitOnce(
  prompt: PromptRun,
): Promise<{ submitted: SubmitResult; rateLimits: number } | { failed: PromptResult }> {
  const { row, batchId } = prompt.input;
  const { submitJob } = proxyActivities<Activities>({
    startToCloseTimeout: prompt.input.activityTimeoutMs,
    retry: RETRY_POLICIES.submitJob,
  });
  let rateLimits = 0;
  for (;;) {
    try {
      const submitted = await submitJob.executeWithOptions({ summary: `submit row ${row.id}` }, [
        { batchId, row },
      ]);
      return { submitted, rateLimits };
    } catch (err) {
      if (isCancellation(err)) {
        return {
          failed: prompt.finish({
            status: 'failed',
            attempts: 1 + rateLimits,
            polls: 0,
            errorCode: 'cancelled',
            errorMessage: 'the batch was cancelled before this row was submitted',
          }),
        };
      }
      const failure = applicationFailure(err);
      if (failure?.type === FailureType.RateLimited) {
        const { retryAfterMs } = (failure.details?.[0] ?? { retryAfterMs: DEFAULT_RETRY_AFTER_MS }) as {
          retryAfterMs: number;
        };
        if (prompt.batch)
          await prompt.batch.signal(promptRateLimitedSignal, {
            rowId: row.id,
            untilMs: Date.now() + retryAfterMs,
          });
        rateLimits += 1;
        await sleep(retryAfterMs, {
          summary: `429: waiting ${Math.ceil(retryAfterMs / 1000)} s as Retry-After asked`,
        });
      } else if (failure?.type === FailureType.Unauthorized || failure?.type === FailureType.Forbidden) {
        await prompt.waitForUnblock(failure);
      } else {
        return {
          failed: prompt.finish({
            status: 'failed',
            attempts: 1 + rateLimits,
            polls: 0,
            errorCode: failureCode(failure, 'submit_failed'),
            errorMessage: failure?.message ?? String(err),
          }),
        };
      }
    }
  }
}

/**
 * Polls the submitted job until it is terminal (downloading it with --download) or its deadline passes;
 * 401/403 wait for the batch to resume, and the time paused does not count against the deadline.
 */
async function pollUntilDone(
  prompt: PromptRun,
  submitted: SubmitResult,
  rateLimits: number,
): Promise<PromptResult> {
  const { input } = prompt;
  const { poll } = input;
  const common = {
    jobId: submitted.jobId,
    attempts: submitted.attempts + rateLimits,
    submittedAt: new Date(submitted.submittedAt).toISOString(),
  };

  const deadlinePassed = () =>
    prompt.finish({
      ...common,
      status: 'failed',
      polls: 0,
      errorCode: 'deadline_exceeded',
      errorMessage: `job ${submitted.jobId} did not finish within ${Math.round(input.jobDeadlineMs / 1000)} s`,
    });

  for (;;) {
    const remaining = submitted.submittedAt + input.jobDeadlineMs + prompt.pausedMs - Date.now();
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
        return prompt.finish({
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
        await prompt.waitForUnblock(failure);
        continue;
      }
      return prompt.finish({
        ...common,
        status: 'failed',
        polls: 0,
        errorCode: failureCode(failure, 'poll_failed'),
        errorMessage: failure?.message ?? String(err),
      });
    }
    if (outcome.status === 'succeeded' && outcome.url && input.downloadDir) {
      return prompt.finish({ ...common, ...outcome, ...(await download(input, outcome.url)) });
    }
    return prompt.finish({ ...common, ...outcome });
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
