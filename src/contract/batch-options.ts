// A batch's options and their one table of defaults, applied by the client when it starts a batch. Imported
// by workflow code: no Node built-ins.
import type { EnhanceOptions } from './enhance';
import type { NoticeTo } from './notice';

/**
 * When to poll a job: first poll `firstPollMs` after submission, then every `intervalMs` growing by `backoff`
 * up to `capMs`, each jittered by ±`jitter`. Unless `adaptive` is false, this schedule only holds until the
 * worker has learned the gateway's latency; then each job is first checked when 90% of jobs are finished.
 */
export interface PollSchedule {
  firstPollMs: number;
  intervalMs: number;
  backoff: number;
  capMs: number;
  jitter: number;
  /** false: keep to this schedule even once the worker has learned the gateway's latency. */
  adaptive: boolean;
}

export const DEFAULT_POLL_SCHEDULE: PollSchedule = {
  firstPollMs: 30_000,
  intervalMs: 15_000,
  backoff: 1.5,
  capMs: 120_000,
  jitter: 0.2,
  adaptive: true,
};

export interface BatchOptions {
  /** Most prompts in flight (submitted, not finished) at once. */
  concurrency: number;
  poll: PollSchedule;
  /** A job still unfinished this long after submission fails with `deadline_exceeded`. */
  jobDeadlineMs: number;
  /** Start-to-close timeout of one gateway call activity; bounds how long a crashed worker's call blocks a retry. */
  activityTimeoutMs: number;
  /** Rows read per page by the batch workflow. */
  pageSize: number;
  /** Prompts started per workflow run before the batch continues as new. */
  promptsPerRun: number;
  /** Where the worker writes the manifest; default `out/<batchId>`. */
  outDir?: string;
  /**
   * Download each finished video, verified, as soon as its job completes: into `downloadDir` when set, else
   * into the batch's output folder beside its manifest (`outDir`, or the worker's `<out root>/<batchId>`).
   * false (`--no-download`): only the provider's URL is recorded.
   */
  download: boolean;
  /** Download each finished video into this folder (as the worker sees it), verified, as soon as it completes. */
  downloadDir?: string;
  /** The largest video downloaded, in bytes; a larger one fails its download, not retried. Absent: the default. */
  maxVideoBytes?: number;
  /** Guard rails: the batch stops submitting and ends cleanly once any is crossed. */
  maxFailures?: number;
  /** Failed share of finished rows (0-1), checked once at least 10 rows finished. */
  maxFailureRate?: number;
  /** Most jobs to submit over the whole batch (a spend cap). */
  maxSubmissions?: number;
  /** Epoch ms after which no new job is submitted. */
  deadlineAt?: number;
  /** After a submit whose outcome is unknown: `resend` with the same Idempotency-Key, at most `maxUnknownResends` times; `fail`: the row fails with `submit_unknown`. */
  onUnknownSubmit: UnknownSubmitPolicy;
  /** Resends after unknown submit outcomes, per row. */
  maxUnknownResends: number;
  /** Start-to-close of one submit attempt; the worker keeps its HTTP timeout inside it. */
  submitTimeoutMs: number;
  /** Rate budget (docs/rate-budget.md): priority of this batch's gateway calls, 1 (first) to 5. */
  priority: number;
  /** Rate budget: this batch's weight in the fair share between batches of the same priority. */
  weight: number;
  /** Pause submitting after this many submits in a row had an unknown outcome (0: never). */
  pauseAfterUnknown: number;
  /** Pause the batch when submits could not be sent for this long (connection refused, DNS, ...). */
  unreachablePauseMs: number;
  /** What a downloaded video that differs from its request does to the row. */
  verify: VerifyMode;
  /**
   * Reuse what other batches in the output root paid for (docs/spend-safety.md): a kept video is recorded at no
   * cost, a job that may still finish is followed. False: `run --fresh`, and retry-failed.
   */
  reuse: boolean;
  /**
   * Rewrite each row's prompt once through the gateway's chat completions before its video is paid for
   * (docs/enhance-prompts.md); rows of a CSV with `original_prompt` are sent as they are. Absent: no rewrite.
   */
  enhance?: EnhanceOptions;
  /**
   * Where notices go (`run --notify`, docs/the-morning-after.md): the batch's end, a guard rail's stop, a pause
   * a person must act on. Absent or empty: none. Each by its origin and a reference: the URL, a secret, is kept
   * beside the rows file (notices/notice-store.ts), never in history.
   */
  notify?: NoticeTo[];
  /**
   * Late videos (docs/spend-safety.md#late-videos): a row that ended `deadline_exceeded` or `cancelled` with a
   * job id still has its job checked for this long after it ended, and a video that arrives is downloaded,
   * verified and recorded. 0: no late checks. Absent in batches started before late videos (none).
   */
  lateForMs?: number;
  /**
   * The first late check this long after the row ended; each later one waits half as long again, up to
   * LATE_CHECK_CAP times this (default: 5 minutes, growing to 30).
   */
  lateCheckMs?: number;
  /**
   * The provider the batch's target names can stop a job (its adapter has a cancel call): a cancelled row's job
   * is stopped there, and with `lateForMs` 0 a row's past its deadline (docs/other-video-apis.md). Resolved by
   * the client from the provider; absent: it cannot (the Model Gateway), or a batch started before.
   */
  stopJobs?: boolean;
}

/** The longest wait between late checks, as a multiple of `lateCheckMs` (5 minutes growing to 30). */
export const LATE_CHECK_CAP = 6;

/**
 * The widest window: a Temporal server refuses more than 2,000 pending child workflows, cancel requests or
 * signals per workflow run by default (`limit.numPendingChildExecutions.error` and its siblings), and a batch
 * cancel asks every prompt in flight at once.
 */
export const MAX_CONCURRENCY = 2000;

/** Why a window is refused, naming the server's limit. */
export function concurrencyProblem(n: number): string | undefined {
  if (!Number.isInteger(n) || n < 1) return 'must be a whole number of at least 1';
  if (n > MAX_CONCURRENCY)
    return `must be at most ${MAX_CONCURRENCY}: a Temporal server accepts at most ${MAX_CONCURRENCY} pending child workflows per workflow (limit.numPendingChildExecutions.error)`;
  return undefined;
}

/** What a prompt does after a submit whose outcome is unknown (it may have created a billed job). */
export type UnknownSubmitPolicy = 'resend' | 'fail';

/** While paused as unreachable, each waiting prompt tries its submit again this often (at most a minute). */
export function unreachableRetryMs(unreachablePauseMs: number): number {
  return Math.min(60_000, unreachablePauseMs);
}

/**
 * The largest video downloaded by default (`--max-video-bytes`): 2 GiB, far above any generated clip (a 10 s
 * 1080p video is tens of MB), so only a wrong or hostile URL reaches it.
 */
export const DEFAULT_MAX_VIDEO_BYTES = 2 * 1024 ** 3;

/**
 * The one table of batch defaults, applied by the client when it starts a batch (a flag given, else the
 * batch's stored options, else this); workflows get complete options and apply none. A wide window: with jobs
 * taking minutes, keeping a gateway's rate limit busy takes hundreds of jobs in flight; the gateway queue's
 * rate limit (the learner's, docs/rate-budget.md), not the window, decides how fast requests go.
 */
export const DEFAULT_BATCH_OPTIONS: BatchOptions = {
  concurrency: 500,
  poll: DEFAULT_POLL_SCHEDULE,
  jobDeadlineMs: 60 * 60_000,
  activityTimeoutMs: 30_000,
  pageSize: 100,
  promptsPerRun: 400,
  onUnknownSubmit: 'resend',
  maxUnknownResends: 1,
  submitTimeoutMs: 180_000,
  priority: 3,
  weight: 1,
  pauseAfterUnknown: 5,
  unreachablePauseMs: 120_000,
  verify: 'flag',
  reuse: true,
  download: true,
  maxVideoBytes: DEFAULT_MAX_VIDEO_BYTES,
  lateForMs: 24 * 3600_000,
  lateCheckMs: 5 * 60_000,
};

// Single values of the table, for help texts.
export const DEFAULT_ON_UNKNOWN_SUBMIT = DEFAULT_BATCH_OPTIONS.onUnknownSubmit;

export const DEFAULT_MAX_UNKNOWN_RESENDS = DEFAULT_BATCH_OPTIONS.maxUnknownResends;

export const DEFAULT_SUBMIT_TIMEOUT_MS = DEFAULT_BATCH_OPTIONS.submitTimeoutMs;

export const DEFAULT_PAUSE_AFTER_UNKNOWN = DEFAULT_BATCH_OPTIONS.pauseAfterUnknown;

export const DEFAULT_UNREACHABLE_PAUSE_MS = DEFAULT_BATCH_OPTIONS.unreachablePauseMs;

export const DEFAULT_LATE_FOR_MS = DEFAULT_BATCH_OPTIONS.lateForMs!;

export const DEFAULT_LATE_CHECK_MS = DEFAULT_BATCH_OPTIONS.lateCheckMs!;

/** `--verify`: `flag` (default) records a mismatch on the row; `strict` also ends the row as `video_mismatch`. */
export type VerifyMode = 'flag' | 'strict';
