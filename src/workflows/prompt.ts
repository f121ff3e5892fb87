// One prompt: submit once, then poll by activity retries (durable server-side timers, no history events
// per poll) until the job is terminal or its deadline passes. Never pays twice: the job id is in history as
// soon as the submit activity returns, and every later step only polls that job.
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  getExternalWorkflowHandle,
  proxyActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
  type ExternalWorkflowHandle,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { gatewayActivityOptions } from '../contract/rate-budget';
import { spareChecksApply, waitWithSpareChecks } from './first-check';
import { FailureType, RETRY_POLICIES, SUBMIT_HEARTBEAT_TIMEOUT_MS } from '../contract/failures';
import {
  promptBlockedSignal,
  promptSubmitOutcomeSignal,
  unblockSignal,
  type PromptSubmitOutcome,
} from '../contract/messages';
import { StateAttr } from '../contract/search-attributes';
import {
  NO_VIDEO_URL_CODE,
  rowFields,
  type PollOutcome,
  type PromptInput,
  type PromptResult,
  type RowFields,
  type SubmitResult,
  unreachableRetryMs,
  VIDEO_MISMATCH_CODE,
} from '../contract/types';

function applicationFailure(err: unknown): ApplicationFailure | undefined {
  return err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? err.cause : undefined;
}

function failureCode(failure: ApplicationFailure | undefined, fallback: string): string {
  const details = failure?.details?.[0] as { code?: string } | undefined;
  return details?.code ?? fallback;
}

export async function promptWorkflow(input: PromptInput): Promise<PromptResult> {
  return spendSafePrompt(new PromptRun(input));
}

/** What both phases of a prompt share: its batch, the pause it may wait on, and how it ends. */
class PromptRun {
  /** The batch that started this prompt (absent when run on its own). */
  readonly batch: ExternalWorkflowHandle | undefined;
  /** Time spent waiting for `unblock`; it does not count against the job's deadline. */
  pausedMs = 0;
  /** Gateway calls go to the rate-limited gateway queue, fair between batches (docs/rate-budget.md). */
  readonly gateway: ReturnType<typeof gatewayActivityOptions>;
  /** When this prompt last went on after a refused key (or started): lifts a worker's local key refusal. */
  unblockedAt = Date.now();
  private unblocked = false;
  private readonly base: RowFields;

  constructor(readonly input: PromptInput) {
    const parent = workflowInfo().parent;
    this.batch = parent ? getExternalWorkflowHandle(parent.workflowId) : undefined;
    setHandler(unblockSignal, () => void (this.unblocked = true));
    this.base = rowFields(input.row);
    this.gateway = gatewayActivityOptions({
      taskQueue: workflowInfo().taskQueue,
      batchId: input.batchId,
      priority: input.priority,
      weight: input.weight,
    });
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
    this.unblockedAt = Date.now();
    this.pausedMs += Date.now() - since;
  }

  /**
   * Tells the batch what became of a submit (breaker, unreachable pause). With `wait`, then waits for the batch's go
   * (`unblock`): at once unless the batch paused, or after `timeoutMs` at most. Throws when cancelled.
   */
  async report(outcome: Omit<PromptSubmitOutcome, 'rowId'>, wait = false, timeoutMs?: number): Promise<void> {
    if (!this.batch) return;
    const since = Date.now();
    this.unblocked = false;
    try {
      await this.batch.signal(promptSubmitOutcomeSignal, { rowId: this.input.row.id, ...outcome });
    } catch (err) {
      // A report is advice: a cancelled batch, or one that is gone, must not fail the row (or lose its job
      // id); only a wait that was asked for hears of the cancellation.
      if (wait && isCancellation(err)) throw err;
      return;
    }
    if (!wait) return;
    if (timeoutMs === undefined) await condition(() => this.unblocked);
    else await condition(() => this.unblocked, timeoutMs);
    this.pausedMs += Date.now() - since;
  }

  /**
   * A submit refused with 429: tells the batch and waits for its go. Under a running-
   * jobs cap that comes when one of the batch's jobs finishes or a Retry-After has passed; under a rate limit,
   * after the Retry-After. At most the longer of twice the Retry-After and CAPACITY_WAIT_MAX_MS (then it tries
   * again, keeping its place). Without a batch to ask, sleeps the Retry-After. Throws when cancelled.
   */
  async waitForSlot(retryAfterMs: number): Promise<void> {
    this.unblocked = false;
    try {
      if (!this.batch) throw new Error('no batch');
      await this.batch.signal(promptSubmitOutcomeSignal, {
        rowId: this.input.row.id,
        outcome: 'capacity',
        retryAfterMs,
        waiting: true,
      });
    } catch (err) {
      if (isCancellation(err)) throw err;
      await sleep(retryAfterMs, { summary: '429: waiting as Retry-After asked' });
      return;
    }
    await condition(() => this.unblocked, Math.max(2 * retryAfterMs, CAPACITY_WAIT_MAX_MS));
  }
}

/** The longest a prompt waits for its batch's submission slot before it tries again (a bound, not a pace). */
const CAPACITY_WAIT_MAX_MS = 5 * 60_000;

/** What a submitted row's result carries whatever the poll's outcome: its job, its submit attempts. */
type PollCommon = Pick<PromptResult, 'attempts'> & Partial<PromptResult>;

/** A poll that failed for good (not a pause, a cancellation or the deadline): the row fails with its code. */
function pollFailed(
  prompt: PromptRun,
  common: PollCommon,
  failure: ApplicationFailure | undefined,
  err: unknown,
): PromptResult {
  return prompt.finish({
    ...common,
    status: 'failed',
    polls: 0,
    errorCode: failureCode(failure, 'poll_failed'),
    errorMessage: failure?.message ?? String(err),
  });
}

/** The job finished: the row ends with its outcome, after the video is fetched when asked (--download). */
async function pollFinished(
  prompt: PromptRun,
  common: PollCommon,
  outcome: PollOutcome,
): Promise<PromptResult> {
  const { input } = prompt;
  if (outcome.status === 'succeeded' && outcome.url && input.downloadDir) {
    return prompt.finish({ ...common, ...outcome, ...(await download(input, outcome.url)) });
  }
  return prompt.finish({ ...common, ...outcome });
}

/** Fetches the finished video right away (result URLs expire at many providers); a failure is recorded, not fatal. */
async function download(input: PromptInput, url: string): Promise<Partial<PromptResult>> {
  const { downloadVideo } = proxyActivities<Activities>({
    startToCloseTimeout: '10m',
    retry: RETRY_POLICIES.downloadVideo,
  });
  try {
    const got = await downloadVideo.executeWithOptions({ summary: `download ${input.row.id}.mp4` }, [
      { url, dir: input.downloadDir!, name: `${input.row.id}.mp4`, parameters: input.row.parameters },
    ]);
    // With --verify strict a video that differs from its request ends the row failed, its job id,
    // URL and file kept; nothing is submitted again unless `retry-failed --code video_mismatch` asks.
    const { verification } = got;
    if (input.verify === 'strict' && verification && !verification.ok) {
      return {
        ...got,
        status: 'failed',
        errorCode: VIDEO_MISMATCH_CODE,
        errorMessage: `the video differs from the request: ${verification.problems.join('; ')}`,
      };
    }
    return got;
  } catch (err) {
    const failure = applicationFailure(err);
    return { downloadError: failure?.message ?? String(err) };
  }
}

// ---------------------------------------------------------------------------------------------------------
// Spend safety:
// - a known job (from an earlier run) is checked before paying for another;
// - a submit whose outcome is unknown is resent with the same key at most `maxUnknownResends` times, or the
//   row fails with `submit_unknown`; every unknown outcome is counted on the row (`unknownSubmits`);
// - the submit activity runs in a non-cancellable scope, so a cancel never loses the id of a job in flight;
//   rows cancelled while waiting (Retry-After, refused key, polling) end as `cancelled` with their job id;
// - the deadline is decided by the poll activity from a real status check, never by a timeout of waiting.

/** Code of a row whose submit outcome stayed unknown (it may be billed); `retry-failed --code` re-sends it. */
export const SUBMIT_UNKNOWN_CODE = 'submit_unknown';

interface SpendState {
  generation: number;
  unknownSubmits: number;
  /** Submit activities started (rate limits and resends included), for `attempts`. */
  rateLimits: number;
}

function cancelledResult(
  prompt: PromptRun,
  spend: SpendState,
  jobId: string | undefined,
  waiting: string,
): PromptResult {
  return prompt.finish({
    status: 'failed',
    attempts: spend.rateLimits + spend.unknownSubmits + (jobId ? 1 : 0),
    polls: 0,
    errorCode: 'cancelled',
    errorMessage: jobId
      ? `the batch was cancelled while ${waiting}; job ${jobId} was submitted and may still finish at the gateway`
      : `the batch was cancelled while ${waiting}; no job id is known for this row` +
        (spend.unknownSubmits
          ? ` (${spend.unknownSubmits} submit(s) with an unknown outcome may have made one)`
          : ''),
    ...(jobId ? { jobId } : {}),
    ...spendFields(spend),
  });
}

function spendFields(spend: SpendState): Pick<PromptResult, 'unknownSubmits' | 'generation'> {
  return {
    ...(spend.unknownSubmits > 0 ? { unknownSubmits: spend.unknownSubmits } : {}),
    generation: spend.generation,
  };
}

async function spendSafePrompt(prompt: PromptRun): Promise<PromptResult> {
  const { input } = prompt;
  // Unknown outcomes of earlier runs count too: "at most 1 + N jobs" holds for the row's whole life.
  const spend: SpendState = {
    generation: input.keyGeneration,
    unknownSubmits: input.priorUnknownSubmits,
    rateLimits: 0,
  };
  if (input.knownJobId) {
    // The known job belongs to the previous generation: keyGeneration is what a new submit would use.
    const known = await checkKnownJob(prompt, input.knownJobId, {
      ...spend,
      generation: Math.max(0, spend.generation - 1),
    });
    if (known) return known;
  }
  const submit = await submitSpendSafe(prompt, spend);
  if ('failed' in submit) return submit.failed;
  upsertSearchAttributes([{ key: StateAttr, value: 'running' }]);
  return pollSpendSafe(prompt, submit.submitted, spend, { fresh: true });
}

/**
 * Checks a job an earlier run made: finished -> its result (no new job); unfinished -> polled to the end;
 * failed or gone -> undefined (the caller submits a new job with the next key generation).
 */
async function checkKnownJob(
  prompt: PromptRun,
  jobId: string,
  spend: SpendState,
): Promise<PromptResult | undefined> {
  const { checkJob } = proxyActivities<Activities>({
    ...prompt.gateway,
    startToCloseTimeout: prompt.input.activityTimeoutMs,
    retry: RETRY_POLICIES.checkJob,
  });
  for (;;) {
    try {
      const check = await checkJob.executeWithOptions({ summary: `check known job ${jobId}` }, [
        { jobId, unblockedAt: prompt.unblockedAt },
      ]);
      if (check.state === 'succeeded') {
        const outcome = { status: 'succeeded' as const, url: check.url, polls: 1 };
        const base = { jobId, attempts: 0, ...spendFields(spend) };
        if (prompt.input.downloadDir)
          return prompt.finish({ ...base, ...outcome, ...(await download(prompt.input, check.url)) });
        return prompt.finish({ ...base, ...outcome });
      }
      if (check.state === 'no_url') {
        // Paid, but nothing to fetch: not paid for again; the job id stays for a later check.
        return prompt.finish({
          status: 'failed',
          jobId,
          attempts: 0,
          polls: 1,
          errorCode: NO_VIDEO_URL_CODE,
          errorMessage: check.errorMessage,
          ...spendFields(spend),
        });
      }
      if (check.state === 'unfinished') {
        upsertSearchAttributes([{ key: StateAttr, value: 'running' }]);
        // Its submit time is not known here: the deadline counts from now.
        return pollSpendSafe(prompt, { jobId, submittedAt: Date.now(), attempts: 0 }, spend);
      }
      return undefined; // failed or gone: a new job is the only way to get this row's video
    } catch (err) {
      if (isCancellation(err)) return cancelledResult(prompt, spend, jobId, 'checking its known job');
      const failure = applicationFailure(err);
      if (failure?.type === FailureType.Unauthorized || failure?.type === FailureType.Forbidden) {
        try {
          await prompt.waitForUnblock(failure);
        } catch (e) {
          if (isCancellation(e))
            return cancelledResult(prompt, spend, jobId, 'waiting for a working API key');
          throw e;
        }
        continue;
      }
      return prompt.finish({
        status: 'failed',
        jobId,
        attempts: 0,
        polls: 1,
        errorCode: failureCode(failure, 'check_failed'),
        errorMessage: failure?.message ?? String(err),
        ...spendFields(spend),
      });
    }
  }
}

/** Submits with the unknown-outcome policy; waits for Retry-After and a refused key durably and cancellably. */
async function submitSpendSafe(
  prompt: PromptRun,
  spend: SpendState,
): Promise<{ submitted: SubmitResult } | { failed: PromptResult }> {
  const { row, batchId } = prompt.input;
  const policy = prompt.input.onUnknownSubmit;
  const maxResends = prompt.input.maxUnknownResends;
  const { submitJob } = proxyActivities<Activities>({
    ...prompt.gateway,
    startToCloseTimeout: prompt.input.submitTimeoutMs,
    heartbeatTimeout: SUBMIT_HEARTBEAT_TIMEOUT_MS,
    retry: RETRY_POLICIES.submitJob,
  });
  const scope = CancellationScope.current();
  for (;;) {
    if (scope.consideredCancelled)
      return { failed: cancelledResult(prompt, spend, undefined, 'waiting to submit') };
    let submitted: SubmitResult | undefined;
    let failure: ApplicationFailure | undefined;
    let error: unknown;
    // Never cancelled mid-flight: a submit that reaches the gateway must bring its job id home.
    await CancellationScope.nonCancellable(async () => {
      try {
        submitted = await submitJob.executeWithOptions({ summary: `submit row ${row.id}` }, [
          {
            batchId,
            row,
            generation: spend.generation,
            ...(prompt.input.outDir ? { outDir: prompt.input.outDir } : {}),
            unblockedAt: prompt.unblockedAt,
            ...(prompt.input.keyBatchId ? { keyBatchId: prompt.input.keyBatchId } : {}),
            ...(spend.unknownSubmits > 0 ? { afterUnknown: true } : {}),
            unreachableAfterMs: prompt.input.unreachablePauseMs,
          },
        ]);
      } catch (err) {
        error = err;
        failure = applicationFailure(err);
      }
    });
    if (submitted) {
      if (scope.consideredCancelled)
        return { failed: cancelledResult(prompt, spend, submitted.jobId, 'its submit was in flight') };
      await prompt.report({ outcome: 'sent' });
      return {
        submitted: { ...submitted, attempts: submitted.attempts + spend.rateLimits + spend.unknownSubmits },
      };
    }
    if (failure?.type === FailureType.SubmitUnknown) {
      spend.unknownSubmits += 1;
      let resend = policy === 'resend' && spend.unknownSubmits <= maxResends && !scope.consideredCancelled;
      try {
        // The breaker: the batch may hold this resend until someone looked at the gateway and resumed.
        await prompt.report({ outcome: 'unknown', waiting: resend, reason: failure.message }, resend);
      } catch (err) {
        if (!isCancellation(err)) throw err;
        resend = false;
      }
      if (!resend) {
        if (scope.consideredCancelled)
          return { failed: cancelledResult(prompt, spend, undefined, 'its submit was in flight') };
        return {
          failed: prompt.finish({
            status: 'failed',
            attempts: spend.rateLimits + spend.unknownSubmits,
            polls: 0,
            errorCode: SUBMIT_UNKNOWN_CODE,
            errorMessage:
              `${failure.message}. The outcome of ${spend.unknownSubmits} submit(s) is unknown: the gateway may ` +
              `have created (and billed) a job whose id vidbatch never received` +
              (policy === 'fail'
                ? ' (--on-unknown-submit fail: not re-sent)'
                : ` (resent ${maxResends} time(s), the most --max-unknown-resends allows)`),
            ...spendFields(spend),
          }),
        };
      }
      continue; // the same key: a gateway that honours it returns the job the lost answer was about
    }
    try {
      if (failure?.type === FailureType.GatewayUnreachable) {
        // Nothing was sent: the batch pauses with the reason; try again in a minute, or at once on resume.
        const { sinceMs } = (failure.details?.[0] ?? {}) as { sinceMs?: number };
        await prompt.report(
          { outcome: 'unreachable', reason: failure.message, ...(sinceMs ? { sinceMs } : {}) },
          true,
          unreachableRetryMs(prompt.input.unreachablePauseMs),
        );
        continue;
      }
      if (failure?.type === FailureType.RateLimited) {
        const { retryAfterMs } = failure.details?.[0] as { retryAfterMs: number };
        spend.rateLimits += 1;
        // The batch tells a running-jobs cap (docs/rate-budget.md) from a rate limit: under a cap the row
        // waits for the batch's slot, not to wake with every other refused row; else until Retry-After.
        await prompt.waitForSlot(retryAfterMs);
        continue;
      } else if (failure?.type === FailureType.Unauthorized || failure?.type === FailureType.Forbidden) {
        await prompt.waitForUnblock(failure);
      } else {
        return {
          failed: prompt.finish({
            status: 'failed',
            attempts: 1 + spend.rateLimits + spend.unknownSubmits,
            polls: 0,
            errorCode: failureCode(failure, 'submit_failed'),
            errorMessage: failure?.message ?? String(error),
            ...spendFields(spend),
          }),
        };
      }
    } catch (err) {
      if (isCancellation(err)) {
        const waiting =
          failure?.type === FailureType.RateLimited
            ? 'waiting for Retry-After'
            : failure?.type === FailureType.GatewayUnreachable
              ? 'waiting for the gateway to answer'
              : 'waiting for a working API key';
        return { failed: cancelledResult(prompt, spend, undefined, waiting) };
      }
      throw err;
    }
  }
}

/**
 * Polls the job until it is terminal; the poll activity decides the deadline from a real status check made
 * after `deadlineAt` (submit time + job deadline + time paused). No schedule-to-close: waiting is not failing.
 * `fresh`: the job was just submitted (not a known job from an earlier run, which is checked at once).
 */
async function pollSpendSafe(
  prompt: PromptRun,
  submitted: SubmitResult,
  spend: SpendState,
  { fresh = false } = {},
): Promise<PromptResult> {
  const { input } = prompt;
  const common = {
    jobId: submitted.jobId,
    attempts: submitted.attempts,
    submittedAt: new Date(submitted.submittedAt).toISOString(),
    ...spendFields(spend),
    ...(submitted.journalError ? { journalError: submitted.journalError } : {}),
  };
  const { pollJob } = proxyActivities<Activities>({
    ...prompt.gateway,
    startToCloseTimeout: input.activityTimeoutMs,
    retry: RETRY_POLICIES.pollJob(input.poll.intervalMs),
  });
  // Submit time + job deadline + time paused so far (a pause moves it).
  const deadlineAt = () => submitted.submittedAt + input.jobDeadlineMs + prompt.pausedMs;
  // On the gateway queue every dispatch takes a token of the shared budget, so the wait for the first check
  // is a timer here rather than a pollJob attempt that sends nothing (docs/rate-budget.md); with spare
  // budget, checks go earlier (first-check.ts).
  let checkNow = false;
  if (fresh) {
    const adaptive = input.poll.adaptive;
    const learned = adaptive ? submitted.firstCheckAgeMs : undefined;
    const dueAt = Math.min(submitted.submittedAt + (learned ?? input.poll.firstPollMs), deadlineAt() + 100);
    const spareAge = adaptive ? submitted.spareCheckAgeMs : undefined;
    const wait = {
      gateway: prompt.gateway,
      dueAt,
      spareFrom: spareAge === undefined ? undefined : submitted.submittedAt + spareAge,
      poll: {
        jobId: submitted.jobId,
        submittedAt: submitted.submittedAt,
        poll: input.poll,
        deadlineAt: deadlineAt(),
        unblockedAt: prompt.unblockedAt,
      },
      activityTimeoutMs: input.activityTimeoutMs,
      intervalMs: input.poll.intervalMs,
    };
    try {
      if (spareChecksApply(wait)) {
        const early = await waitWithSpareChecks(wait);
        if (early) return pollFinished(prompt, common, early);
      } else if (dueAt > Date.now())
        await sleep(dueAt - Date.now(), { summary: `first status check of job ${submitted.jobId}` });
    } catch (err) {
      if (isCancellation(err))
        return { ...cancelledResult(prompt, spend, submitted.jobId, 'polling'), ...common };
      throw err;
    }
    checkNow = true;
  }
  for (;;) {
    let outcome: PollOutcome;
    try {
      outcome = await pollJob.executeWithOptions({ summary: `poll job ${submitted.jobId}` }, [
        {
          jobId: submitted.jobId,
          submittedAt: submitted.submittedAt,
          poll: input.poll,
          deadlineAt: deadlineAt(),
          unblockedAt: prompt.unblockedAt,
          ...(checkNow ? { checkNow } : {}),
        },
      ]);
    } catch (err) {
      if (isCancellation(err))
        return { ...cancelledResult(prompt, spend, submitted.jobId, 'polling'), ...common };
      const failure = applicationFailure(err);
      if (failure?.type === FailureType.Unauthorized || failure?.type === FailureType.Forbidden) {
        try {
          await prompt.waitForUnblock(failure);
        } catch (e) {
          if (isCancellation(e))
            return {
              ...cancelledResult(prompt, spend, submitted.jobId, 'waiting for a working API key'),
              ...common,
            };
          throw e;
        }
        continue;
      }
      return pollFailed(prompt, common, failure, err);
    }
    return pollFinished(prompt, common, outcome);
  }
}
