// Over 400 lines: the three gateway activities share the attempt window, error counting and the journal.
// The gateway activities: submitJob (one POST per attempt, the same Idempotency-Key on every retry; an
// outcome that may have made a job goes to the workflow as SubmitUnknown, never re-sent by Temporal),
// checkJob (one status check of a job an earlier run made) and pollJob (at most one status check per
// attempt; "not finished" is a retryable failure timed by the poll schedule; the deadline is decided only by
// a real check; the check that finds a job completed fetches its video when it fits in the attempt). Every
// gateway call fits inside its attempt: a Retry-After hold and the HTTP timeout together.
import { resolve } from 'node:path';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { DEFAULT_RETRY_AFTER_MS, SUBMIT_HEARTBEAT_EVERY_MS } from '../contract/failures';
import type { PollSchedule } from '../contract/batch-options';
import type {
  FirstCheckTiming,
  InlineDownload,
  JobCheck,
  PollOutcome,
  SubmitResult,
  VideoTarget,
} from '../contract/jobs';
import { promptSubmitOutcomeSignal } from '../contract/messages';
import { JOB_GONE_CODE, jobGoneMessage, NO_VIDEO_URL_CODE } from '../contract/prompt';
import type { PromptRow } from '../contract/rows';
import type { CallOptions, GatewayClient } from '../gateway/client';
import {
  ConnectionError,
  GatewayError,
  NotFoundError,
  NotSentError,
  RateLimitError,
} from '../gateway/errors';
import { appendJournal, readJournal, type JournalEntry } from '../results/jobs-journal';
import { recordHeartbeat } from './heartbeat';
import { fetchVideo } from './outputs';
import { claimSteps, PaidElsewhere, type Claim } from './request-claims';
import { allowedPath, type PathRoots } from './paths';
import { LatencyTracker } from './latency';
import { nextCheck } from './poll-schedule';
import { gatewayUnreachable, jobNotFinished, notSent, submitUnknown, toFailure } from './to-failure';

export interface SubmitInput {
  batchId: string;
  row: PromptRow;
  /** Idempotency-Key generation (see PromptInput.keyGeneration); absent: 0. */
  generation?: number;
  /** The batch's output folder, for the jobs journal; absent: `<outRoot>/<batchId>`. */
  outDir?: string;
  /** When the prompt was last unblocked (or started): lifts a local key refusal older than that. */
  unblockedAt?: number;
  /** The batch whose Idempotency-Key the row carries (retry-failed: the original batch); default `batchId`. */
  keyBatchId?: string;
  /** A resend after an unknown outcome: the jobs journal is read for a job under this key first. */
  afterUnknown?: boolean;
  /**
   * When nothing could be sent (connection refused, DNS) for this long since the first attempt, the submit
   * ends as GatewayUnreachable so the batch can pause with the reason. Absent: retried for ever.
   */
  unreachableAfterMs?: number;
  /** Claim the row's request before the POST and follow a job another row paid for (request-claims.ts). */
  claimRequest?: boolean;
  /** The job this submit replaces (it failed or is gone): a claim that ended with it is not followed. */
  replaces?: string;
  /**
   * The batch workflow to tell (by signal, from here) that a job id came back: the breaker, the unreachable
   * pause and the capacity gate count sends. Absent: a prompt run on its own.
   */
  reportTo?: string;
}

export interface PollInput {
  jobId: string;
  submittedAt: number;
  poll: PollSchedule;
  /**
   * Epoch ms after which a check that finds the job unfinished ends the row as `deadline_exceeded`
   * (submittedAt + job deadline + time paused). Absent in prompts started before spend safety.
   */
  deadlineAt?: number;
  unblockedAt?: number;
  /**
   * The workflow already waited for the first check (a timer): the first attempt checks at once. Set on the
   * gateway queue, where every dispatch takes a token of the shared budget.
   */
  checkNow?: boolean;
  /** A spare check (workflows/first-check.ts): every attempt checks at once, before the job's due age. */
  spare?: boolean;
  /** Where the video goes: the check that finds the job succeeded fetches it too (PollOutcome.download). */
  download?: VideoTarget;
  /**
   * A late check (workflows/late-video.ts): the row already ended; `submittedAt` is its end, `deadlineAt` the end
   * of its late window. What it finds teaches the latency estimate nothing, and is not counted again.
   */
  late?: boolean;
}

export interface CheckInput {
  jobId: string;
  unblockedAt?: number;
}

/**
 * Heartbeat details of a submit attempt: about to send (a later attempt that sees them cannot know the
 * outcome unless `jobId` is there too), and the job the answer named, recorded before anything else.
 */
interface SubmitHeartbeat {
  sending: boolean;
  jobId?: string;
}

/**
 * Tells the batch a job id came back. Sent from the activity rather than the prompt workflow, which saves the
 * prompt a signal and a workflow task per row. Advice, not the record: the job id reaches the prompt's history
 * by the activity's result, and a batch that misses this (gone, or the call failed) still hears of the row's
 * end, which clears what the report would have; so a failure is logged, never thrown.
 */
async function reportSent(ctx: Context, input: SubmitInput): Promise<void> {
  if (!input.reportTo) return;
  try {
    const batch = ctx.client.workflow.getHandle(input.reportTo);
    await ctx.client.withDeadline(Date.now() + REPORT_SENT_TIMEOUT_MS, () =>
      batch.signal(promptSubmitOutcomeSignal, { rowId: input.row.id, outcome: 'sent' }),
    );
  } catch (err) {
    ctx.log.warn('could not tell the batch a job was made', { rowId: input.row.id, error: String(err) });
  }
}

/**
 * The Idempotency-Key of a row's submit: the same on every retry and resend of a row, so a gateway that
 * honours it never creates a second job; generation n > 0 (a new job after a known one failed or is gone)
 * gets its own key.
 */
export function idempotencyKey(batchId: string, rowId: string, generation = 0): string {
  return `vidbatch:${batchId}:${rowId}${generation > 0 ? `:g${generation}` : ''}`;
}

/** vidbatch's own counters, next to the Temporal runtime's metrics (exported with `--metrics`). */
function count(name: string, tags: Record<string, string> = {}): void {
  Context.current().metricMeter.createCounter(name).add(1, tags);
}

/**
 * The time an attempt has for a gateway call: a Retry-After hold plus the HTTP call end by `sendBy`, a margin
 * before the attempt's start-to-close, so a call never outlives its attempt.
 */
export function attemptWindow(startedAt: number, httpTimeoutMs: number): { holdMs: number; sendBy: number } {
  const startToClose = Context.current().info.startToCloseTimeoutMs;
  const margin = Math.min(2000, startToClose / 4);
  const window = startToClose - margin;
  // A short attempt still gets a quarter of its time for a hold, the rest for the answer.
  return { holdMs: Math.max(window - httpTimeoutMs, window / 4, 0), sendBy: startedAt + window };
}

/** A gateway call's options within its attempt (attemptWindow), lifting a local key refusal older than `unblockedAt`. */
export function callOptions(
  httpTimeoutMs: number,
  unblockedAt: number | undefined,
  startedAt = Date.now(),
): CallOptions {
  const { holdMs, sendBy } = attemptWindow(startedAt, httpTimeoutMs);
  return { maxWaitMs: holdMs, sendBy, ...(unblockedAt !== undefined ? { unblockedAt } : {}) };
}

export function countGatewayError(err: unknown, operation: string, gateway: GatewayClient): void {
  const kind = err instanceof Error ? err.name : 'Error';
  count('vidbatch_gateway_errors', { operation, class: kind });
  if (err instanceof RateLimitError) {
    count('vidbatch_rate_limited', { operation });
    // A chat call is a POST: it holds (and is held with) the submissions.
    const posts = operation === 'submit' || operation === 'chat';
    const holdMs = gateway.holds.remainingMs(posts ? 'submit' : 'status');
    Context.current().log.info(
      `429 from the gateway; this worker's ${posts ? 'submissions and chat calls' : 'status checks'} wait ${(holdMs / 1000).toFixed(1)} s`,
      { operation },
    );
    if (err.unreadableRetryAfter !== undefined)
      Context.current().log.warn(
        `unreadable Retry-After from the gateway; waiting the default ${DEFAULT_RETRY_AFTER_MS / 1000} s`,
        { operation, retryAfter: err.unreadableRetryAfter },
      );
    // A unit the spec leaves open (a header in milliseconds) must not hold the budget for days.
    if (err.clampedFromMs !== undefined)
      Context.current().log.warn('Retry-After over the cap; waiting the cap instead', {
        operation,
        askedMs: err.clampedFromMs,
        retryAfterMs: err.retryAfterMs,
      });
  }
}

/** A delay before the next check that does not run far past the deadline (the check after it decides). */
function untilDeadlineDelay(delayMs: number, deadlineAt: number | undefined): number {
  return deadlineAt === undefined ? delayMs : Math.min(delayMs, Math.max(100, deadlineAt - Date.now() + 100));
}

function noUrlMessage(jobId: string): string {
  return (
    `job ${jobId} answered "completed" with no usable video URL (data[0].url); ` +
    'its id is kept, so a later check (a re-run) can still recover the video'
  );
}

/** One status check of a job, read as a known job's check (a 404 is `gone`); gateway errors are thrown as they are. */
export async function checkOnce(
  gateway: GatewayClient,
  { jobId, unblockedAt }: CheckInput,
): Promise<JobCheck> {
  let job;
  try {
    job = await gateway.getJob(jobId, callOptions(gateway.timeoutMs, unblockedAt));
  } catch (err) {
    if (err instanceof NotFoundError) return { state: 'gone' };
    throw err;
  }
  if (job.status === 'completed')
    return job.url
      ? { state: 'succeeded', url: job.url }
      : { state: 'no_url', errorMessage: noUrlMessage(jobId) };
  if (job.status === 'gone') return { state: 'gone', rawStatus: job.rawStatus };
  if (job.status === 'failed')
    return {
      state: 'failed',
      errorCode: job.error?.code ?? 'job_failed',
      errorMessage: job.error?.message || `the gateway reported status "${job.rawStatus}"`,
    };
  return { state: 'unfinished', rawStatus: job.rawStatus };
}

/** How many dead jobs of a request one submit attempt looks past before following the latest (a bound). */
const MAX_DEAD_JOB_LOOKS = 3;

/** Time kept back from a status check's attempt when it fetches the video too, so the attempt ends in time. */
const INLINE_DOWNLOAD_MARGIN_MS = 3_000;

/** The longest a submit waits to tell the batch of its job id (well inside its heartbeat timeout). */
const REPORT_SENT_TIMEOUT_MS = 5_000;

/** `roots`: where the jobs journal may be written (activities/paths.ts); undefined: anywhere. */
export function createJobActivities(gateway: GatewayClient, outRoot = 'out', roots?: PathRoots) {
  const latency = new LatencyTracker();
  // Attempts that sent nothing (a hold), per idempotency key, so a row's `attempts` counts real submissions.
  const unsentSubmits = new Map<string, number>();

  /**
   * A journal line is a record, not the submit: failing to write it must not fail (and re-send) the submit.
   * Not silent either: the error is returned, and a row whose job is missing from the journal says so.
   */
  const journal = async (
    input: SubmitInput,
    entry: Omit<JournalEntry, 'at' | 'generation'>,
  ): Promise<string | undefined> => {
    try {
      const dir = await allowedPath(input.outDir ?? resolve(outRoot, input.batchId), 'out', roots);
      const { model, parameters, request, line } = input.row;
      // A store that is away is waited for only while the attempt has time left to return the job id.
      const ctx = Context.current();
      const retryUntil =
        ctx.info.currentAttemptScheduledTimestampMs + ctx.info.startToCloseTimeoutMs - 10_000;
      await appendJournal(
        dir,
        {
          ...entry,
          ...(request ? { request } : {}),
          line,
          generation: input.generation ?? 0,
          at: new Date().toISOString(),
          // What the spend ledger prices a job by when its row has no manifest line yet.
          model,
          ...(typeof parameters.resolution === 'string' ? { resolution: parameters.resolution } : {}),
          ...(typeof parameters.duration === 'number' ? { duration: parameters.duration } : {}),
        },
        retryUntil,
      );
    } catch (err) {
      Context.current().log.warn('could not write the jobs journal', {
        rowId: entry.rowId,
        error: String(err),
      });
      return err instanceof Error ? err.message : String(err);
    }
    return undefined;
  };

  /**
   * The job the journal holds for this row and key generation, if any: an attempt that crashed after the answer
   * came (and was journalled) but before the activity completed leaves its job only there.
   */
  const journalled = async (input: SubmitInput): Promise<string | undefined> => {
    try {
      const dir = await allowedPath(input.outDir ?? resolve(outRoot, input.batchId), 'out', roots);
      const generation = input.generation ?? 0;
      const entries = await readJournal(dir);
      const mine = entries.filter((e) => e.rowId === input.row.id && e.generation === generation && e.jobId);
      return mine.at(-1)?.jobId;
    } catch {
      return undefined; // no journal here: nothing known, as before
    }
  };

  const { claimFor, release, settleClaim, followClaimed } = claimSteps(journal);

  /**
   * The row's claim of its request. A job another row paid for is followed only while it may bring its video:
   * one the provider says failed, is gone or completed without a video is paid for again, here, once (the
   * claim chain lets one row take the next claim; the others follow that new job).
   */
  const claimLive = async (input: SubmitInput, key: string, waitMs: number): Promise<Claim | undefined> => {
    let replaces = input.replaces;
    for (let looks = 0; ; looks++) {
      try {
        return await claimFor({ ...input, ...(replaces ? { replaces } : {}) }, key, waitMs);
      } catch (err) {
        if (!(err instanceof PaidElsewhere) || looks >= MAX_DEAD_JOB_LOOKS) throw err;
        const fate = await checkOnce(gateway, { jobId: err.jobId }).catch(() => undefined);
        if (fate?.state !== 'failed' && fate?.state !== 'gone' && fate?.state !== 'no_url') throw err;
        Context.current().log.info(
          'the job paid for this request earlier ended without a video; paying again',
          {
            rowId: input.row.id,
            jobId: err.jobId,
            state: fate.state,
          },
        );
        replaces = err.jobId;
      }
    }
  };

  /**
   * The video of a job a status check just found succeeded, fetched within what is left of the check's attempt
   * (a history event saved per row: no download activity). Undefined when it could not finish in time or failed
   * in a way a retry may change: the download activity then fetches it, resuming the .part file.
   */
  const inlineDownload = async (
    url: string,
    target: VideoTarget,
    startedAt: number,
  ): Promise<InlineDownload | undefined> => {
    const ctx = Context.current();
    const leftMs = ctx.info.startToCloseTimeoutMs - (Date.now() - startedAt) - INLINE_DOWNLOAD_MARGIN_MS;
    if (leftMs < 1_000) return undefined;
    try {
      const signal = AbortSignal.any([ctx.cancellationSignal, AbortSignal.timeout(leftMs)]);
      const video = await fetchVideo(url, target, outRoot, roots, signal, gateway.videoAuth());
      return { ok: true, video };
    } catch (err) {
      if (err instanceof ApplicationFailure && err.nonRetryable && err.type)
        return { ok: false, type: err.type, message: err.message };
      ctx.log.info('video not fetched with its status check; the download activity fetches it', {
        name: target.name,
        error: err instanceof Error ? err.message : String(err),
      });
      return undefined;
    }
  };

  return {
    async submitJob(input: SubmitInput): Promise<SubmitResult> {
      const startedAt = Date.now();
      const ctx = Context.current();
      const { attempt } = ctx.info;
      const heartbeat = ctx.info.heartbeatDetails as SubmitHeartbeat | undefined;
      const { batchId, row } = input;
      const key = idempotencyKey(input.keyBatchId ?? batchId, row.id, input.generation);
      if (heartbeat?.jobId) {
        // The previous attempt had the job's id and died before returning it: no journal read needed. Its
        // journal line may be missing, so it is written (again: readers count one job once).
        ctx.log.info("job found in the last attempt's heartbeat; not sending again", {
          rowId: row.id,
          jobId: heartbeat.jobId,
        });
        const journalError = await journal(input, { rowId: row.id, jobId: heartbeat.jobId });
        await settleClaim(input, key, heartbeat.jobId);
        await reportSent(ctx, input);
        return {
          jobId: heartbeat.jobId,
          submittedAt: Date.now(),
          attempts: attempt,
          ...(journalError ? { journalError } : {}),
        };
      }
      if (heartbeat?.sending || input.afterUnknown) {
        const jobId = await journalled(input);
        if (jobId) {
          ctx.log.info('job found in the jobs journal; not sending again', { rowId: row.id, jobId });
          await settleClaim(input, key, jobId);
          await reportSent(ctx, input);
          return { jobId, submittedAt: Date.now(), attempts: attempt };
        }
      }
      if (heartbeat?.sending) {
        // The previous attempt crashed or timed out mid-POST: sending again here would be a silent resend.
        count('vidbatch_submit_unknown', { cause: 'attempt_ended_while_sending' });
        await journal(input, { rowId: row.id, unknown: true });
        throw submitUnknown(
          `row ${row.id}: an earlier attempt of this submit ended while sending (worker crash or timeout); ` +
            'the gateway may have created a job',
        );
      }
      const { holdMs, sendBy } = attemptWindow(startedAt, gateway.submitTimeoutMs);
      // While the POST is out the attempt heartbeats (always `sending`), so a worker that dies mid-POST is
      // noticed within the heartbeat timeout; before it, no heartbeat, so no wait may come near that timeout.
      let beating: ReturnType<typeof setInterval> | undefined;
      let beats = 0;
      let claim: Claim | undefined;
      try {
        // Claimed before paid, before any hold: another batch's row paying for the same request now, or that
        // paid for a job that may still bring its video, is followed instead (PaidElsewhere, NotSentError). Its
        // wait comes out of the attempt's hold budget, never out of the POST's own timeout.
        const holdBudgetMs = Math.min(holdMs, SUBMIT_HEARTBEAT_EVERY_MS * 3);
        claim = await claimLive(input, key, holdBudgetMs);
        const job = await gateway.submit(
          { model: row.model, input: row.input, parameters: row.parameters },
          key,
          {
            maxWaitMs: Math.max(0, holdBudgetMs - (Date.now() - startedAt)),
            sendBy,
            ...(input.unblockedAt !== undefined ? { unblockedAt: input.unblockedAt } : {}),
            beforeSend: async () => {
              await recordHeartbeat(ctx, { sending: true });
              beating = setInterval(() => {
                beats += 1;
                ctx.heartbeat({ sending: true } satisfies SubmitHeartbeat);
              }, SUBMIT_HEARTBEAT_EVERY_MS);
            },
          },
        );
        clearInterval(beating);
        count('vidbatch_jobs_submitted');
        // The job id goes to the server before anything else: a retry of an attempt that dies from here on
        // finds it in the heartbeat, without reading the journal (a listing of the store's). After a long POST
        // the SDK may still hold a throttled `sending` beat: it gets the job id too, so it cannot take it back
        // out. After a short one it holds none, and a call here would only cost one more recorded heartbeat.
        if (beats > 0) ctx.heartbeat({ sending: true, jobId: job.id } satisfies SubmitHeartbeat);
        await recordHeartbeat(ctx, { sending: true, jobId: job.id }).catch((err: unknown) => {
          ctx.log.warn('could not record the job id in the heartbeat', { rowId: row.id, error: String(err) });
        });
        const journalError = await journal(input, { rowId: row.id, jobId: job.id });
        await release(claim, job.id);
        await reportSent(ctx, input);
        const unsent = unsentSubmits.get(key) ?? 0;
        unsentSubmits.delete(key);
        latency.submitted(job.id);
        const firstCheckAgeMs = latency.firstCheckAge(job.id);
        const spareCheckAgeMs = latency.spareCheckAge();
        return {
          jobId: job.id,
          submittedAt: Date.now(),
          attempts: Math.max(1, attempt - unsent),
          ...(firstCheckAgeMs !== undefined ? { firstCheckAgeMs } : {}),
          ...(spareCheckAgeMs !== undefined ? { spareCheckAgeMs } : {}),
          ...(journalError ? { journalError } : {}),
          ...(job.requestId ? { requestId: job.requestId } : {}),
        };
      } catch (err) {
        clearInterval(beating);
        if (err instanceof PaidElsewhere) return followClaimed(input, err);
        // Nothing paid (refused, or nothing sent): the next claimer of the request may pay. An unknown outcome
        // keeps the claim: this row's resend takes it again, and others wait for it or for its time-out.
        if (!(err instanceof GatewayError && err.outcomeUnknown))
          await release(claim, undefined, err instanceof Error ? err.name : 'failed');
        if (err instanceof NotSentError) {
          if (unsentSubmits.size > 10_000) unsentSubmits.clear();
          unsentSubmits.set(key, (unsentSubmits.get(key) ?? 0) + 1);
          throw notSent(err);
        }
        countGatewayError(err, 'submit', gateway);
        if (err instanceof GatewayError && err.outcomeUnknown) {
          count('vidbatch_submit_unknown', { cause: err.name });
          // One line, not the SDK's stack: the workflow applies the policy and the row reports it.
          ctx.log.warn('submit outcome unknown: the gateway may have made a job', {
            rowId: row.id,
            error: err.message,
          });
          await journal(input, { rowId: row.id, unknown: true });
        } else if (err instanceof ConnectionError) {
          // Nothing was sent; the next attempt may send (if this is lost, it only counts as unknown).
          await recordHeartbeat(ctx, { sending: false }).catch(() => undefined);
          const since = ctx.info.scheduledTimestampMs;
          if (
            input.unreachableAfterMs !== undefined &&
            attempt >= 2 &&
            Date.now() - since >= input.unreachableAfterMs
          )
            throw gatewayUnreachable(err.message, since);
        }
        throw toFailure(err, 'submitJob');
      }
    },

    /** One status check of a job an earlier run of the row made: is it worth waiting for, or gone? */
    async checkJob(input: CheckInput): Promise<JobCheck> {
      try {
        return await checkOnce(gateway, input);
      } catch (err) {
        if (err instanceof NotSentError) throw notSent(err);
        countGatewayError(err, 'check', gateway);
        throw toFailure(err, 'checkJob');
      }
    },

    /**
     * At most one status check per attempt; "not finished" is a retryable failure whose nextRetryDelay is the
     * poll schedule: the learned latency once known (see latency.ts), the configured schedule until then.
     * With `deadlineAt`, the row ends as deadline_exceeded only when a check sent at or after it finds the
     * job unfinished; waits (Retry-After, the budget) never end it, and no wait runs far past the deadline.
     */
    async pollJob(input: PollInput): Promise<PollOutcome> {
      const { jobId, submittedAt, poll, deadlineAt, unblockedAt } = input;
      const { attempt } = Context.current().info;
      // A row counts as finished once: a late check's end is counted apart (a video that arrived late, or not).
      const finished = (tags: { status: string; code: string }) =>
        input.late ? count('vidbatch_late_checks_ended', tags) : count('vidbatch_jobs_finished', tags);
      const now = Date.now();
      const timing = nextCheck(poll, attempt, jobId, now - submittedAt, latency, {
        firstCheckDue: input.checkNow === true && (attempt === 1 || input.spare === true),
      });
      const untilDeadline = deadlineAt === undefined ? Infinity : deadlineAt - now;
      if ('waitMs' in timing && untilDeadline > 0) {
        const waitMs = Math.min(timing.waitMs, untilDeadline + 100);
        throw jobNotFinished(
          `job ${jobId} submitted; next status check in ${Math.ceil(waitMs / 1000)} s`,
          waitMs,
        );
      }
      const retryDelayMs = 'retryDelayMs' in timing ? timing.retryDelayMs : Math.max(poll.intervalMs, 100);
      let sentAt = now;
      let job;
      try {
        job = await gateway.getJob(jobId, {
          ...callOptions(gateway.timeoutMs, unblockedAt, now),
          beforeSend: () => void (sentAt = Date.now()),
        });
      } catch (err) {
        if (err instanceof NotSentError) throw notSent(err);
        countGatewayError(err, 'status', gateway);
        if (err instanceof NotFoundError) {
          finished({ status: 'failed', code: JOB_GONE_CODE });
          return {
            status: 'failed',
            errorCode: JOB_GONE_CODE,
            errorMessage: `${jobGoneMessage(jobId)}: ${err.message}`,
            polls: attempt,
            ...(err.requestId ? { requestId: err.requestId } : {}),
          };
        }
        const failure = toFailure(err, 'pollJob', untilDeadlineDelay(retryDelayMs, deadlineAt));
        // A job the gateway keeps answering badly (5xx, an unreadable body) ends at its deadline like one
        // that never finishes: the row must end, and the batch with it.
        if (deadlineAt !== undefined && sentAt >= deadlineAt && !failure.nonRetryable) {
          finished({ status: 'failed', code: 'deadline_exceeded' });
          return {
            status: 'failed',
            errorCode: 'deadline_exceeded',
            errorMessage: `job ${jobId} got no usable answer by its deadline (${new Date(deadlineAt).toISOString()}); last error: ${failure.message}`,
            polls: attempt,
          };
        }
        throw failure;
      }
      // A late check's age counts from the row's end, and its job is long past the learned latency.
      if (!input.late)
        latency.checked(
          jobId,
          Date.now() - submittedAt,
          job.status === 'completed' || job.status === 'failed',
        );
      if (job.status === 'gone') {
        finished({ status: 'failed', code: JOB_GONE_CODE });
        return {
          status: 'failed',
          errorCode: JOB_GONE_CODE,
          errorMessage: jobGoneMessage(jobId, job.rawStatus),
          polls: attempt,
        };
      }
      if (job.status === 'completed' && !job.url) {
        finished({ status: 'failed', code: NO_VIDEO_URL_CODE });
        return {
          status: 'failed',
          errorCode: NO_VIDEO_URL_CODE,
          errorMessage: noUrlMessage(jobId),
          polls: attempt,
        };
      }
      if (job.status === 'completed') {
        finished({ status: 'succeeded', code: '' });
        // Not a spare check: the due check cancels it when it comes and would fetch the same file alongside.
        const download =
          input.download && job.url && !input.spare
            ? await inlineDownload(job.url, input.download, now)
            : undefined;
        return { status: 'succeeded', url: job.url, polls: attempt, ...(download ? { download } : {}) };
      }
      if (job.status === 'failed') {
        finished({ status: 'failed', code: job.error?.code ?? 'job_failed' });
        return {
          status: 'failed',
          errorCode: job.error?.code ?? 'job_failed',
          errorMessage: job.error?.message || `the gateway reported status "${job.rawStatus}"`,
          polls: attempt,
        };
      }
      const unknown = job.status === 'unknown';
      if (unknown)
        Context.current().log.warn('undocumented job status, treated as not finished', {
          jobId,
          status: job.rawStatus,
        });
      if (deadlineAt !== undefined && sentAt >= deadlineAt) {
        finished({ status: 'failed', code: 'deadline_exceeded' });
        return {
          status: 'failed',
          errorCode: 'deadline_exceeded',
          errorMessage: `job ${jobId} was still ${job.rawStatus} at a status check after its deadline (${new Date(deadlineAt).toISOString()})`,
          polls: attempt,
        };
      }
      const nextDelay = untilDeadlineDelay(retryDelayMs, deadlineAt);
      throw jobNotFinished(
        `job ${jobId} is ${job.rawStatus}${unknown ? ' (undocumented status, treated as not finished)' : ''}`,
        nextDelay,
      );
    },

    /**
     * A local activity (no gateway call, no token of the budget): when a job submitted before this worker
     * knew the gateway's latency is due for its first check, by what the worker knows now. `dueInMs` and
     * `spareInMs` are absent while it still knows nothing (latency.ts waitsForEstimate says whether to wait).
     */
    firstCheckTiming(input: { jobId: string; submittedAt: number }): Promise<FirstCheckTiming> {
      const ageMs = Date.now() - input.submittedAt;
      const dueAge = latency.firstCheckAge(input.jobId);
      const spareAge = latency.spareCheckAge();
      return Promise.resolve({
        waitForEstimate: latency.waitsForEstimate(input.jobId),
        ...(dueAge !== undefined ? { dueInMs: Math.max(0, dueAge - ageMs) } : {}),
        ...(latency.dueIsGuess() ? { guess: true } : {}),
        ...(spareAge !== undefined ? { spareInMs: Math.max(0, spareAge - ageMs) } : {}),
      });
    },
  };
}
