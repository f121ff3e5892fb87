// Over 400 lines: one prompt's decisions share its counters and job; split, each half would need the other.
// The decisions of one prompt, as a pure class (no Temporal calls, time passed in): what a submit, check or
// poll outcome means next, the counters a row's result carries (unknown outcomes, 429s, time paused), and the
// result itself. prompt.ts makes the Temporal calls and waits, and asks this class what to do. Spend safety:
// - a known job (from an earlier run) is checked before paying for another;
// - a submit whose outcome is unknown is resent with the same key at most `maxUnknownResends` times, or the
//   row fails with `submit_unknown`; every unknown outcome counts, earlier runs' too ("at most 1 + N jobs"
//   holds for the row's whole life);
// - rows cancelled while waiting end as `cancelled`, with their job id when one is known;
// - the deadline is decided by the poll activity from a real status check, never by a timeout of waiting.
import { FailureType } from '../contract/failures';
import { unreachableRetryMs } from '../contract/batch-options';
import type {
  DownloadedVideo,
  JobCheck,
  PollOutcome,
  SubmitResult,
  Verification,
  VideoTarget,
} from '../contract/jobs';
import {
  isContentRefusal,
  JOB_GONE_CODE,
  jobGoneMessage,
  NO_VIDEO_URL_CODE,
  URL_EXPIRED_CODE,
  VIDEO_MISMATCH_CODE,
  type PromptInput,
  type PromptResult,
  type ReusedFrom,
} from '../contract/prompt';
import { rowFields, type RowFields } from '../contract/rows';

/** Code of a row whose submit outcome stayed unknown (it may be billed); `retry-failed --code` re-sends it. */
export const SUBMIT_UNKNOWN_CODE = 'submit_unknown';

/** An activity's failure as the workflow saw it (its ApplicationFailure, when it had one). */
export interface ActivityError {
  type?: string;
  message: string;
  /** The failure's first detail: `code`, `retryAfterMs`, `sinceMs`, `requestId`, as the activity set them. */
  details?: {
    code?: string;
    retryAfterMs?: number;
    sinceMs?: number;
    requestId?: string;
    chatCalls?: number;
  };
}

/** What to do after a submit that brought no job id. */
export type SubmitStep =
  /** The outcome is unknown: tell the batch; `resend` with the same key (after its go), else fail the row. */
  | { kind: 'unknown'; resend: boolean }
  /** Nothing was sent: tell the batch (it pauses) and try again after `retryMs` or its go. */
  | { kind: 'unreachable'; sinceMs?: number; retryMs: number }
  /** 429: wait for the batch's slot (or the Retry-After), then try again. */
  | { kind: 'capacity'; retryAfterMs: number }
  /** 401/403: wait until the key works again. */
  | { kind: 'blocked' }
  /** Anything else: the row fails. */
  | { kind: 'failed' };

/** What to do after a check of a known job. */
export type KnownJobStep =
  | { kind: 'succeeded'; url: string }
  | { kind: 'noUrl'; errorMessage: string }
  /** Unfinished: poll it to the end (its submit time is not known: the deadline counts from now). */
  | { kind: 'poll' }
  /**
   * The row ends with the job's failure, its job id kept, nothing paid again: the gateway no longer knows the
   * job (`job_gone`: it may have finished and been billed), or refused the row's content (sent again unchanged,
   * it would be refused again).
   */
  | { kind: 'ended'; outcome: PollOutcome }
  /** Failed: a new job, with the next key generation. */
  | { kind: 'submit' };

/** What a finished row's result has beyond its row's fields and its finish time. */
export type ResultFields = Omit<PromptResult, keyof RowFields | 'finishedAt'>;

/** The longest a prompt waits for its batch's submission slot before it tries again (a bound, not a pace). */
export const CAPACITY_WAIT_MAX_MS = 5 * 60_000;

const isKeyRefusal = (e: ActivityError | undefined) =>
  e?.type === FailureType.Unauthorized || e?.type === FailureType.Forbidden;

export class PromptState {
  /** Key generation of the job the result reports (a known job's is the one before a new submit's). */
  generation: number;
  /** Submits whose outcome was unknown, earlier runs' included. */
  unknownSubmits: number;
  /** Submits refused with 429. */
  rateLimits = 0;
  /** Time spent waiting for the batch's go after a refused key or an unknown outcome; moves the deadline. */
  pausedMs = 0;
  /** When this prompt last went on after a refused key (or started): lifts a worker's local key refusal. */
  unblockedAt: number;
  /** The job this row has, once known. */
  jobId: string | undefined;
  /** The gateway's request id (`x-request-id`) of the last answer that said something about this row. */
  private requestId: string | undefined;
  private submitted: SubmitResult | undefined;
  /** The known job a new submit replaces (it failed, or an earlier run stopped it). */
  private replaces: string | undefined;
  /** What the prompt's rewrite adds to every result (its chat calls and tokens); empty without one. */
  rewrite: Pick<PromptResult, 'chatCalls' | 'chatTokens'> = {};

  constructor(
    readonly input: PromptInput,
    now: number,
  ) {
    this.generation = input.keyGeneration;
    this.unknownSubmits = input.priorUnknownSubmits;
    this.unblockedAt = now;
    // The known job belongs to the previous generation: keyGeneration is what a new submit would use.
    if (input.knownJobId) {
      this.jobId = input.knownJobId;
      this.generation = Math.max(0, input.keyGeneration - 1);
    }
  }

  /** The row's result, ending it. */
  result(fields: ResultFields, finishedAt: string): PromptResult {
    // The row as sent: after a rewrite, its prompt is the rewrite and `originalPrompt` the user's.
    return { ...rowFields(this.input.row), ...this.rewrite, ...fields, finishedAt };
  }

  /** The submit activity's input, for the current generation and what came before. */
  submitInput() {
    const { batchId, row, outDir, keyBatchId, unreachablePauseMs, claimRequest } = this.input;
    return {
      batchId,
      row,
      generation: this.generation,
      claimRequest,
      // The job a new generation replaces (it failed, or is gone): a claim that ended with it is not followed.
      ...((this.jobId ?? this.replaces) ? { replaces: this.jobId ?? this.replaces } : {}),
      ...(outDir ? { outDir } : {}),
      unblockedAt: this.unblockedAt,
      ...(keyBatchId ? { keyBatchId } : {}),
      ...(this.unknownSubmits > 0 ? { afterUnknown: true } : {}),
      unreachableAfterMs: unreachablePauseMs,
    };
  }

  /** A known job was checked: what comes next. */
  checked(check: JobCheck): KnownJobStep {
    if (check.state === 'succeeded') return { kind: 'succeeded', url: check.url };
    // Paid, but nothing to fetch: not paid for again; the job id stays for a later check.
    if (check.state === 'no_url') return { kind: 'noUrl', errorMessage: check.errorMessage };
    if (check.state === 'unfinished') return { kind: 'poll' };
    if (check.state === 'gone' && !this.input.knownJobStopped)
      return {
        kind: 'ended',
        outcome: {
          status: 'failed',
          errorCode: JOB_GONE_CODE,
          errorMessage: jobGoneMessage(this.jobId, check.rawStatus),
          polls: 1,
        },
      };
    if (check.state === 'failed' && isContentRefusal(check.errorCode))
      return {
        kind: 'ended',
        outcome: { status: 'failed', errorCode: check.errorCode, errorMessage: check.errorMessage, polls: 1 },
      };
    // Failed (or stopped by an earlier run): a new job is the only way to get this row's video, under the next
    // generation's key; the claim that ended with the old job is not followed.
    this.replaces = this.jobId;
    this.jobId = undefined;
    this.generation = this.input.keyGeneration;
    return { kind: 'submit' };
  }

  /** A known job's check failed: wait for a working key, or the row fails with the job id kept. */
  checkFailed(error: ActivityError | undefined): 'blocked' | 'failed' {
    this.noteRequestId(error?.details?.requestId);
    return isKeyRefusal(error) ? 'blocked' : 'failed';
  }

  /** A submit brought a job id. */
  /** The other row whose payment `jobId` was, when this row's submit followed a claimed request's job. */
  followedFrom(jobId: string | undefined): ReusedFrom | undefined {
    const s = this.submitted;
    return s?.followedFrom && jobId !== undefined && s.jobId === jobId ? s.followedFrom : undefined;
  }

  sent(submitted: SubmitResult): SubmitResult {
    this.jobId = submitted.jobId;
    this.noteRequestId(submitted.requestId);
    this.submitted = {
      ...submitted,
      attempts: submitted.attempts + this.rateLimits + this.unknownSubmits,
    };
    return this.submitted;
  }

  /** A submit brought no job id: what it means next (the counters move here). */
  submitFailed(error: ActivityError | undefined): SubmitStep {
    this.noteRequestId(error?.details?.requestId);
    switch (error?.type) {
      case FailureType.SubmitUnknown:
        this.unknownSubmits += 1;
        return {
          kind: 'unknown',
          resend:
            this.input.onUnknownSubmit === 'resend' && this.unknownSubmits <= this.input.maxUnknownResends,
        };
      case FailureType.GatewayUnreachable:
        return {
          kind: 'unreachable',
          ...(error.details?.sinceMs ? { sinceMs: error.details.sinceMs } : {}),
          retryMs: unreachableRetryMs(this.input.unreachablePauseMs),
        };
      case FailureType.RateLimited:
        this.rateLimits += 1;
        return { kind: 'capacity', retryAfterMs: error.details?.retryAfterMs ?? 0 };
      case FailureType.Unauthorized:
      case FailureType.Forbidden:
        return { kind: 'blocked' };
      default:
        return { kind: 'failed' };
    }
  }

  /** How long a prompt waits for its batch's slot after a 429 with this Retry-After. */
  static slotWaitMs(retryAfterMs: number): number {
    return Math.max(2 * retryAfterMs, CAPACITY_WAIT_MAX_MS);
  }

  /** The row fails after an unknown submit outcome that is not resent. */
  unknownFailed(error: ActivityError): ResultFields {
    const { onUnknownSubmit, maxUnknownResends } = this.input;
    return {
      status: 'failed',
      attempts: this.rateLimits + this.unknownSubmits,
      polls: 0,
      errorCode: SUBMIT_UNKNOWN_CODE,
      errorMessage:
        `${error.message}. The outcome of ${this.unknownSubmits} submit(s) is unknown: the gateway may ` +
        `have created (and billed) a job whose id vidbatch never received` +
        (onUnknownSubmit === 'fail'
          ? ' (--on-unknown-submit fail: not re-sent)'
          : ` (resent ${maxUnknownResends} time(s), the most --max-unknown-resends allows)`),
      ...this.counters(),
    };
  }

  /** The row fails with the submit's error (a refused request, ...). */
  submitRefused(error: ActivityError | undefined, fallback: string): ResultFields {
    return {
      status: 'failed',
      attempts: 1 + this.rateLimits + this.unknownSubmits,
      polls: 0,
      errorCode: error?.details?.code ?? 'submit_failed',
      errorMessage: error?.message ?? fallback,
      ...this.counters(),
    };
  }

  /** The row fails with a known job's failed check; its job id is kept for a later check. */
  checkRefused(error: ActivityError | undefined, fallback: string): ResultFields {
    return {
      status: 'failed',
      jobId: this.jobId,
      attempts: 0,
      polls: 1,
      errorCode: error?.details?.code ?? 'check_failed',
      errorMessage: error?.message ?? fallback,
      ...this.counters(),
    };
  }

  /** A known job finished without a usable video URL. */
  noVideoUrl(errorMessage: string): ResultFields {
    return {
      status: 'failed',
      jobId: this.jobId,
      attempts: 0,
      polls: 1,
      errorCode: NO_VIDEO_URL_CODE,
      errorMessage,
      ...this.counters(),
    };
  }

  /** The job being polled: submitted now (a fresh submit) or known, its deadline counting from `now`. */
  polling(now: number): SubmitResult {
    this.submitted ??= { jobId: this.jobId!, submittedAt: now, attempts: 0 };
    return this.submitted;
  }

  /** Submit time + job deadline + time paused so far (a pause moves it). */
  deadlineAt(): number {
    return this.submitted!.submittedAt + this.input.jobDeadlineMs + this.pausedMs;
  }

  /**
   * When a fresh job is first checked (the age by which 90% of jobs are finished, once learned, else the
   * schedule's first poll; never after the deadline), and from when spare checks may find it finished.
   */
  /**
   * When the job's first check is due, from when spare checks may go, and whether that due time is known:
   * false when the schedule's first poll stands in for a latency the worker had not learned at the submit.
   */
  firstCheck(): { dueAt: number; spareFrom: number | undefined; known: boolean } {
    const s = this.submitted!;
    const { adaptive, firstPollMs } = this.input.poll;
    const learned = adaptive ? s.firstCheckAgeMs : undefined;
    const spareAge = adaptive ? s.spareCheckAgeMs : undefined;
    return {
      dueAt: Math.min(s.submittedAt + (learned ?? firstPollMs), this.deadlineAt() + 100),
      spareFrom: spareAge === undefined ? undefined : s.submittedAt + spareAge,
      known: !adaptive || learned !== undefined,
    };
  }

  /** A poll failed: wait for a working key, or the row fails with its code. */
  pollFailed(error: ActivityError | undefined): 'blocked' | 'failed' {
    this.noteRequestId(error?.details?.requestId);
    return isKeyRefusal(error) ? 'blocked' : 'failed';
  }

  /** The row fails with the poll's error, its job kept. */
  pollRefused(error: ActivityError | undefined, fallback: string): ResultFields {
    return {
      ...this.jobFields(),
      status: 'failed',
      polls: 0,
      errorCode: error?.details?.code ?? 'poll_failed',
      errorMessage: error?.message ?? fallback,
      ...this.counters(),
    };
  }

  /** The job ended (a poll, or a known job's check, said so). */
  finished(outcome: PollOutcome): ResultFields {
    this.noteRequestId(outcome.requestId);
    // A video fetched with the check becomes the result's own fields (downloaded()), not a field of its own.
    const polled: PollOutcome = { ...outcome };
    delete polled.download;
    return { ...this.jobFields(), ...polled, ...this.counters() };
  }

  /**
   * Whether the finished job's video is to be fetched now: unless --no-download (the client resolves
   * `download`).
   */
  wantsDownload(
    outcome: Pick<PollOutcome, 'status' | 'url'>,
  ): outcome is { status: 'succeeded'; url: string } {
    return outcome.status === 'succeeded' && !!outcome.url && this.input.download;
  }

  /** Where the row's video goes: into `downloadDir`, else the batch's output folder. */
  videoTarget(): VideoTarget {
    const { row, batchId, outDir, downloadDir, maxVideoBytes } = this.input;
    return {
      name: `${row.id}.mp4`,
      parameters: row.parameters,
      ...(downloadDir ? { dir: downloadDir } : { batchId, ...(outDir ? { outDir } : {}) }),
      ...(maxVideoBytes !== undefined ? { maxBytes: maxVideoBytes } : {}),
    };
  }

  /**
   * A download failed: `expired` when its URL answered 403, 404 or 410 (the job is asked once for a fresh
   * URL), else `recorded` (the row stays succeeded with its downloadError: the video was generated).
   */
  downloadFailed(error: ActivityError | undefined): 'expired' | 'recorded' {
    return error?.type === FailureType.UrlExpired ? 'expired' : 'recorded';
  }

  /**
   * The video URL answered 403, 404 or 410 and checking the job once more gave no URL that worked (`why`): the
   * row fails `url_expired` with its job id and last URL kept. The job is paid: nothing is submitted again
   * for it; `vidbatch download` asks the job again, and a re-run checks it before anything else.
   */
  urlExpired(fields: ResultFields, why: string): ResultFields {
    return {
      ...fields,
      status: 'failed',
      errorCode: URL_EXPIRED_CODE,
      errorMessage:
        `${why}. Job ${fields.jobId ?? this.jobId} is paid and kept: \`vidbatch download\` asks the ` +
        `gateway for its video again`,
    };
  }

  /**
   * The video was fetched: its file, and with --verify strict a video that differs from its request ends the
   * row failed, its job id, URL and file kept (nothing is submitted again unless `retry-failed --code
   * video_mismatch` asks).
   */
  downloaded(got: DownloadedVideo & { verification?: Verification }): Partial<PromptResult> {
    const { verification } = got;
    if (this.input.verify === 'strict' && verification && !verification.ok)
      return {
        ...got,
        status: 'failed',
        errorCode: VIDEO_MISMATCH_CODE,
        errorMessage: `the video differs from the request: ${verification.problems.join('; ')}`,
      };
    return got;
  }

  /** The row was cancelled while `waiting`; its job id, when known, is kept. */
  cancelled(waiting: string): ResultFields {
    const { jobId } = this;
    return {
      ...(this.submitted ? this.jobFields() : {}),
      status: 'failed',
      attempts: this.submitted?.attempts ?? this.rateLimits + this.unknownSubmits + (jobId ? 1 : 0),
      polls: 0,
      errorCode: 'cancelled',
      errorMessage: jobId
        ? `the batch was cancelled while ${waiting}; job ${jobId} was submitted and may still finish at the gateway`
        : `the batch was cancelled while ${waiting}; no job id is known for this row` +
          (this.unknownSubmits
            ? ` (${this.unknownSubmits} submit(s) with an unknown outcome may have made one)`
            : ''),
      ...(jobId ? { jobId } : {}),
      ...this.counters(),
    };
  }

  /** A submitted row's job fields (a known job that finished at its check: only its id). */
  private jobFields(): Pick<PromptResult, 'jobId' | 'attempts' | 'submittedAt' | 'journalError'> {
    const s = this.submitted;
    if (!s) return { jobId: this.jobId, attempts: 0 };
    return {
      jobId: s.jobId,
      attempts: s.attempts,
      submittedAt: new Date(s.submittedAt).toISOString(),
      ...(s.journalError ? { journalError: s.journalError } : {}),
    };
  }

  /** The counters every result carries, and the last request id the gateway gave. */
  private counters(): Pick<PromptResult, 'unknownSubmits' | 'generation' | 'requestId'> {
    return {
      ...(this.unknownSubmits > 0 ? { unknownSubmits: this.unknownSubmits } : {}),
      generation: this.generation,
      ...(this.requestId ? { requestId: this.requestId } : {}),
    };
  }

  private noteRequestId(requestId: string | undefined): void {
    if (requestId) this.requestId = requestId;
  }
}

/** Why a job checked again after its URL expired gave no URL to try (it no longer reports `completed` with one). */
export function recheckReason(check: Exclude<JobCheck, { state: 'succeeded' }>): string {
  switch (check.state) {
    case 'gone':
      return `the gateway no longer knows it (${check.rawStatus === undefined ? '404' : `status "${check.rawStatus}"`})`;
    case 'no_url':
      return check.errorMessage;
    case 'failed':
      return `it now reports failed (${check.errorCode}: ${check.errorMessage})`;
    case 'unfinished':
      return `it now reports status "${check.rawStatus}"`;
  }
}
