// One prompt: check the job an earlier run made (if any), submit once, then poll by activity retries (durable
// server-side timers, no history events per poll) until the job is terminal. Never pays twice: the job id is
// in history as soon as the submit activity returns, and every later step only polls that job. This file
// makes the Temporal calls and waits; what each outcome means is PromptState's (prompt-state.ts), the signals
// to and from the batch are BatchLink's (batch-link.ts).
import {
  CancellationScope,
  isCancellation,
  proxyActivities,
  proxyLocalActivities,
  sleep,
  TemporalFailure,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { RETRY_POLICIES, SUBMIT_HEARTBEAT_TIMEOUT_MS } from '../contract/failures';
import { gatewayActivityOptions, resubmitPriority } from '../contract/rate-budget';
import type { InlineDownload, PollOutcome } from '../contract/jobs';
import { workflowFailedResult, type PromptInput, type PromptResult } from '../contract/prompt';
import { rowFields } from '../contract/rows';
import { BatchLink } from './batch-link';
import { waitForFirstCheck } from './first-check';
import { watchLateVideo, type LateRun } from './late-video';
import { activityError, finish, orCancelled, setState } from './prompt-outcome';
import { rewritePrompt } from './prompt-enhance';
import { firstAskStep, MAX_FIRST_ASKS } from './first-ask';
import { stopAbandonedJob } from './stop-job';
import {
  PromptState,
  recheckReason,
  type ActivityError,
  type KnownJobStep,
  type ResultFields,
} from './prompt-state';

export async function promptWorkflow(input: PromptInput): Promise<PromptResult> {
  const run = new PromptRun(input);
  let result: PromptResult;
  try {
    result = await run.steps();
  } catch (err) {
    // The row ends without a result of its own; the batch still hears of it, and the error stays visible.
    if (err instanceof TemporalFailure)
      await run.ended(workflowFailedResult(rowFields(input.row), err.message, new Date().toISOString()));
    throw err;
  }
  // A followed job that ended the row is another batch's payment: the row says whose.
  const followed =
    input.followedFrom && result.jobId === input.knownJobId
      ? input.followedFrom
      : run.state.followedFrom(result.jobId);
  if (followed) result = { ...result, reusedFrom: followed };
  // A job the row gave up on is stopped at the provider where it can be, before the row's end is told.
  result = await stopAbandonedJob(run, result, run.batch.followers);
  await run.ended(result);
  // The row ended on time, and its batch knows. A job it stopped waiting for may still bring its video: watched
  // for a while, and kept as the row's new state if it comes (late-video.ts).
  return (await watchLateVideo(run, result)) ?? result;
}

class PromptRun implements LateRun {
  readonly state: PromptState;
  readonly batch: BatchLink;
  /** Gateway calls go to the rate-limited gateway queue, fair between batches (docs/rate-budget.md). */
  readonly gateway: ReturnType<typeof gatewayActivityOptions>;

  constructor(readonly input: PromptInput) {
    this.state = new PromptState(input, Date.now());
    this.batch = new BatchLink(this.state);
    this.gateway = gatewayActivityOptions({
      taskQueue: workflowInfo().taskQueue,
      batchId: input.batchId,
      priority: input.priority,
      weight: input.weight,
    });
  }

  /** The row's steps, each ending it when it can: rewrite, the known job, submit, poll. */
  async steps(): Promise<PromptResult> {
    const { input } = this;
    // First, before anything is paid: a failed rewrite ends the row with no job made for it.
    if (input.enhance && input.row.originalPrompt === undefined) {
      const failed = await this.rewrite();
      if (failed) return failed;
    }
    if (input.knownJobId) {
      const known = await this.checkKnownJob();
      if (known) return known;
    }
    const failed = await this.submit();
    if (failed) return failed;
    setState('running');
    return this.poll(true);
  }

  /** Tells the batch the row ended (its current run: the one that started it may have continued as new). */
  ended(result: PromptResult): Promise<void> {
    return this.batch.ended(result);
  }

  /** The row's prompt rewritten through the gateway's chat completions (prompt-enhance.ts). */
  rewrite(): Promise<PromptResult | undefined> {
    return rewritePrompt(this.state, this.batch, this.gateway);
  }

  /**
   * Checks the job an earlier run made: finished -> its result (no new job); unfinished -> polled to the end;
   * failed or gone -> undefined (a new job is submitted with the next key generation).
   */
  async checkKnownJob(): Promise<PromptResult | undefined> {
    const { state } = this;
    const jobId = state.jobId!;
    const { checkJob } = this.checkActivity();
    for (;;) {
      let step: KnownJobStep;
      try {
        const check = await checkJob.executeWithOptions({ summary: `check known job ${jobId}` }, [
          { jobId, unblockedAt: state.unblockedAt },
        ]);
        step = state.checked(check);
      } catch (err) {
        if (isCancellation(err)) return finish(state, state.cancelled('checking its known job'));
        const error = activityError(err);
        if (state.checkFailed(error) === 'failed')
          return finish(state, state.checkRefused(error, String(err)));
        const waited = await orCancelled(state, 'waiting for a working API key', () =>
          this.batch.waitForUnblock(error!.message),
        );
        if (waited.cancelled) return waited.cancelled;
        continue;
      }
      if (step.kind === 'succeeded') return this.finished({ status: 'succeeded', url: step.url, polls: 1 });
      if (step.kind === 'noUrl') return finish(state, state.noVideoUrl(step.errorMessage));
      if (step.kind === 'ended') return finish(state, state.finished(step.outcome));
      if (step.kind === 'submit') return undefined;
      setState('running');
      state.polling(Date.now());
      return this.poll(false);
    }
  }

  /**
   * Submits with the unknown-outcome policy; waits for a slot after a 429 and for a refused key durably and
   * cancellably. Returns the row's result when it ended without a job; undefined once a job id came back.
   */
  async submit(): Promise<PromptResult | undefined> {
    const { state, input } = this;
    const options = {
      ...this.gateway,
      startToCloseTimeout: input.submitTimeoutMs,
      heartbeatTimeout: SUBMIT_HEARTBEAT_TIMEOUT_MS,
      retry: RETRY_POLICIES.submitJob,
    };
    const { submitJob } = proxyActivities<Activities>(options);
    // After a submit that brought no job, the next goes ahead of the batch's other calls (resubmitPriority).
    const { submitJob: resubmitJob } = proxyActivities<Activities>({
      ...options,
      priority: { ...options.priority, priorityKey: resubmitPriority(input.priority) },
    });
    const scope = CancellationScope.current();
    for (let tries = 0; ; tries++) {
      if (scope.consideredCancelled) return finish(state, state.cancelled('waiting to submit'));
      let error: ActivityError | undefined;
      let thrown: unknown;
      // Never cancelled mid-flight: a submit that reaches the gateway must bring its job id home.
      const submitted = await CancellationScope.nonCancellable(() =>
        (tries === 0 ? submitJob : resubmitJob)
          .executeWithOptions({ summary: `submit row ${input.row.id}` }, [
            { ...state.submitInput(), ...this.batch.reportTo() },
          ])
          .catch((err: unknown) => {
            thrown = err;
            error = activityError(err);
            return undefined;
          }),
      );
      if (submitted) {
        if (scope.consideredCancelled) {
          state.jobId = submitted.jobId;
          return finish(state, state.cancelled('its submit was in flight'));
        }
        state.sent(submitted); // the activity told the batch (SubmitInput.reportTo)
        return undefined;
      }
      const step = state.submitFailed(error);
      if (step.kind === 'unknown') {
        let resend = step.resend && !scope.consideredCancelled;
        try {
          // The breaker: the batch may hold this resend until someone looked at the gateway and resumed.
          await this.batch.report({ outcome: 'unknown', waiting: resend, reason: error!.message }, resend);
        } catch (err) {
          if (!isCancellation(err)) throw err;
          resend = false;
        }
        if (resend) continue; // the same key: a gateway that honours it returns the job the lost answer was about
        if (scope.consideredCancelled) return finish(state, state.cancelled('its submit was in flight'));
        return finish(state, state.unknownFailed(error!));
      }
      if (step.kind === 'failed') return finish(state, state.submitRefused(error, String(thrown)));
      const waited = await orCancelled(state, WAITING[step.kind], () => {
        // Nothing was sent: the batch pauses with the reason; try again in a minute, or at once on resume.
        if (step.kind === 'unreachable')
          return this.batch.report(
            {
              outcome: 'unreachable',
              reason: error!.message,
              ...(step.sinceMs ? { sinceMs: step.sinceMs } : {}),
            },
            true,
            step.retryMs,
          );
        // The batch tells a running-jobs cap (docs/rate-budget.md) from a rate limit: under a cap the row
        // waits for the batch's slot, not to wake with every other refused row; else until Retry-After.
        if (step.kind === 'capacity') return this.batch.waitForSlot(step.retryAfterMs);
        return this.batch.waitForUnblock(error!.message);
      });
      if (waited.cancelled) return waited.cancelled;
    }
  }

  /**
   * Polls the job until it is terminal; the poll activity decides the deadline from a real status check made
   * after the state's deadline (submit time + job deadline + time paused). No schedule-to-close: waiting is
   * not failing. `fresh`: the job was just submitted (a known job from an earlier run is checked at once).
   */
  async poll(fresh: boolean): Promise<PromptResult> {
    const { state, input } = this;
    const job = state.polling(Date.now());
    const { pollJob } = proxyActivities<Activities>({
      ...this.gateway,
      startToCloseTimeout: input.activityTimeoutMs,
      retry: RETRY_POLICIES.pollJob(input.poll.intervalMs),
    });
    const pollInput = () => ({
      jobId: job.jobId,
      submittedAt: job.submittedAt,
      poll: input.poll,
      deadlineAt: state.deadlineAt(),
      unblockedAt: state.unblockedAt,
      // The check that finds the job succeeded fetches its video too (no download activity when that works).
      ...(input.download ? { download: state.videoTarget() } : {}),
    });
    if (fresh) {
      // Every dispatch on the gateway queue takes a token of the shared budget, so the wait for the first
      // check is a timer rather than a pollJob attempt that sends nothing (docs/rate-budget.md); with spare
      // budget, checks go earlier (first-check.ts).
      const waited = await orCancelled(state, 'polling', async () => {
        const first = state.firstCheck();
        const at = first.known ? first : await this.learnedFirstCheck(job, first.dueAt);
        return (
          at &&
          waitForFirstCheck({
            gateway: this.gateway,
            ...at,
            poll: pollInput(),
            activityTimeoutMs: input.activityTimeoutMs,
            intervalMs: input.poll.intervalMs,
          })
        );
      });
      if (waited.cancelled) return waited.cancelled;
      if (waited.value) return this.finished(waited.value);
    }
    for (;;) {
      let outcome: PollOutcome;
      try {
        outcome = await pollJob.executeWithOptions({ summary: `poll job ${job.jobId}` }, [
          { ...pollInput(), ...(fresh ? { checkNow: true } : {}) },
        ]);
      } catch (err) {
        if (isCancellation(err)) return finish(state, state.cancelled('polling'));
        const error = activityError(err);
        if (state.pollFailed(error) === 'failed') return finish(state, state.pollRefused(error, String(err)));
        const waited = await orCancelled(state, 'waiting for a working API key', () =>
          this.batch.waitForUnblock(error!.message),
        );
        if (waited.cancelled) return waited.cancelled;
        continue;
      }
      return this.finished(outcome);
    }
  }

  /**
   * The first check of a job submitted before the worker knew the gateway's latency: after the schedule's
   * first poll, the worker is asked (a local activity: no gateway call, no token of the budget) when the job
   * is due. While it knows nothing yet, the exploring share of jobs is checked now, to learn it, and the others
   * wait another first poll and ask again, at most MAX_FIRST_ASKS times and never past the deadline, when the
   * exploring jobs are enough to learn it (a small batch's are not); a guessed due age far off waits likewise
   * (first-ask.ts). Undefined: check now.
   */
  private async learnedFirstCheck(
    job: { jobId: string; submittedAt: number },
    firstPollAt: number,
  ): Promise<{ dueAt: number; spareFrom: number | undefined } | undefined> {
    const { state, input } = this;
    const { firstCheckTiming } = proxyLocalActivities<Activities>({ startToCloseTimeout: '10 seconds' });
    const latest = state.deadlineAt() + 100;
    let at = firstPollAt;
    for (let ask = 0; ask < MAX_FIRST_ASKS && at < latest; ask++) {
      if (at > Date.now())
        await sleep(at - Date.now(), { summary: `first status check of job ${job.jobId}` });
      const timing = await firstCheckTiming({ jobId: job.jobId, submittedAt: job.submittedAt });
      const now = Date.now();
      const step = firstAskStep(timing, ask, input.poll.firstPollMs);
      if (step === 'due')
        return {
          dueAt: Math.min(now + timing.dueInMs!, latest),
          spareFrom: timing.spareInMs === undefined ? undefined : now + timing.spareInMs,
        };
      if (step === 'check-now') return undefined;
      at = now + input.poll.firstPollMs;
    }
    return undefined;
  }

  /** A late check found the job completed: its video fetched and verified as any row's (late-video.ts). */
  keep(outcome: PollOutcome): Promise<PromptResult> {
    return this.finished(outcome);
  }

  /** The job ended: the row ends with its outcome, after its video is fetched (unless --no-download). */
  private async finished(outcome: PollOutcome): Promise<PromptResult> {
    const { state } = this;
    const fields = state.finished(outcome);
    if (!state.wantsDownload(outcome)) return finish(state, fields);
    return finish(state, await this.fetchVideo(fields, outcome.url, outcome.download));
  }

  /**
   * Fetches the finished video right away (result URLs expire at many providers). A URL that answers 403,
   * 404 or 410 gets one more status check of the job, and the URL it gives (a gateway may sign a fresh one)
   * one more download; when that fails too the row ends `url_expired`, its job kept. Any other failure is
   * recorded on the row, which stays succeeded.
   */
  private async fetchVideo(
    fields: ResultFields,
    url: string,
    fetched?: InlineDownload,
  ): Promise<ResultFields> {
    const { state } = this;
    const first = await this.download(url, fetched);
    if (first.ok) return { ...fields, ...first.fields };
    if (state.downloadFailed(first.error) === 'recorded') return { ...fields, downloadError: first.message };
    const check = await this.checkAgain();
    if (!('url' in check))
      return state.urlExpired(fields, `${first.message}; checked again, the job gave no URL: ${check.why}`);
    if (check.url === url)
      return state.urlExpired(fields, `${first.message}; checked again, the job gave the same URL`);
    const fresh = { ...fields, url: check.url };
    const second = await this.download(check.url);
    if (second.ok) return { ...fresh, ...second.fields };
    if (state.downloadFailed(second.error) === 'recorded') return { ...fresh, downloadError: second.message };
    return state.urlExpired(
      fresh,
      `${first.message}; checked again, the job's new URL failed too: ${second.message}`,
    );
  }

  /**
   * The video at `url`, as a result or a failure: what the status check already fetched (`fetched`), else one
   * download attempt series (the activity's retries).
   */
  private async download(
    url: string,
    fetched?: InlineDownload,
  ): Promise<
    { ok: true; fields: Partial<PromptResult> } | { ok: false; error?: ActivityError; message: string }
  > {
    if (fetched?.ok) return { ok: true, fields: this.state.downloaded(fetched.video) };
    if (fetched)
      return { ok: false, error: { type: fetched.type, message: fetched.message }, message: fetched.message };
    const { downloadVideo } = proxyActivities<Activities>({
      startToCloseTimeout: '10m',
      // A worker that dies mid-download is noticed here, not after the 10 minutes.
      heartbeatTimeout: '30s',
      retry: RETRY_POLICIES.downloadVideo,
    });
    try {
      const got = await downloadVideo.executeWithOptions({ summary: `download ${this.input.row.id}.mp4` }, [
        { url, ...this.state.videoTarget() },
      ]);
      return { ok: true, fields: this.state.downloaded(got) };
    } catch (err) {
      const error = activityError(err);
      return { ok: false, ...(error ? { error } : {}), message: error?.message ?? String(err) };
    }
  }

  /** The one-GET status check of a known job, on the gateway queue. */
  private checkActivity() {
    return proxyActivities<Activities>({
      ...this.gateway,
      startToCloseTimeout: this.input.activityTimeoutMs,
      retry: RETRY_POLICIES.checkJob,
    });
  }

  /** The job's status checked once more after its URL expired: its (maybe fresh) URL, or why there is none. */
  private async checkAgain(): Promise<{ url: string } | { why: string }> {
    const { state } = this;
    const jobId = state.jobId!;
    const { checkJob } = this.checkActivity();
    try {
      const check = await checkJob.executeWithOptions({ summary: `check job ${jobId} for a fresh URL` }, [
        { jobId, unblockedAt: state.unblockedAt },
      ]);
      return check.state === 'succeeded' ? { url: check.url } : { why: recheckReason(check) };
    } catch (err) {
      return { why: activityError(err)?.message ?? String(err) };
    }
  }
}

/** What a cancelled row was waiting for, by the step that made it wait. */
const WAITING = {
  unreachable: 'waiting for the gateway to answer',
  capacity: 'waiting for Retry-After',
  blocked: 'waiting for a working API key',
} as const;
