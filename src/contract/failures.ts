// How activities fail, as workflows see it, and how Temporal retries them. Activities turn errors into these
// failures in one place (activities/to-failure.ts), from the same table the retry policies below list, so the
// two cannot disagree. Imported by workflow code: no Node built-ins.
import type { RetryPolicy } from '@temporalio/common';

/** `ApplicationFailure.type` values thrown by activities; workflows branch on them. */
export const FailureType = {
  Unauthorized: 'Unauthorized',
  Forbidden: 'Forbidden',
  RateLimited: 'RateLimited',
  InvalidRequest: 'InvalidRequest',
  NotFound: 'NotFound',
  JobNotFinished: 'JobNotFinished',
  /** The worker did not send the call (a Retry-After hold longer than the attempt); retried later. */
  NotSent: 'NotSent',
  CsvChanged: 'CsvChanged',
  DownloadFailed: 'DownloadFailed',
  /**
   * A video URL answered 403, 404 or 410 (expired, as signed URLs do, or gone): the same URL cannot work
   * again, a new status check of the job may give a fresh one. Details: `{ httpStatus }`.
   */
  UrlExpired: 'UrlExpired',
  /** A submit whose outcome is unknown (timeout or reset after sending, 5xx, 409, unreadable 2xx): it may have made a job. */
  SubmitUnknown: 'SubmitUnknown',
  /** A submit could not be sent for longer than the batch allows (connection refused, DNS): nothing was sent. */
  GatewayUnreachable: 'GatewayUnreachable',
  /** A prompt's rewrite got no usable answer (or a refusal no retry can change): the row ends `enhance_failed`. */
  EnhanceFailed: 'EnhanceFailed',
  /** A worker cannot use a path the batch names (VIDBATCH_*_ROOT); another worker may. */
  PathNotAllowed: 'PathNotAllowed',
  /** A notice's receiver did not take it (no answer, or not 2xx); retried while its policy allows. */
  NoticeNotDelivered: 'NoticeNotDelivered',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/** A submit-only 429 with a longer Retry-After reads as a running-jobs cap (as the learner reads it). */
export const CAPACITY_RETRY_AFTER_MS = 2000;

/** Without a Retry-After the spec gives no wait; one second is the smallest a seconds header says. */
export const DEFAULT_RETRY_AFTER_MS = 1000;

/**
 * A submit attempt heartbeats while its POST is out, so the attempt of a worker that died mid-POST ends after
 * this long rather than at its start-to-close (minutes): its row learns sooner that the outcome is unknown.
 */
export const SUBMIT_HEARTBEAT_TIMEOUT_MS = 30_000;
/** How often a submit attempt heartbeats while its POST is out, and the longest it waits before sending. */
export const SUBMIT_HEARTBEAT_EVERY_MS = 5_000;

/**
 * Failure types each activity never retries: the workflow must see them (auth -> pause the batch, 429 on
 * submit -> gate the batch) or retrying cannot help. Every other failure is retried by Temporal.
 */
export const NON_RETRYABLE = {
  readRows: [FailureType.CsvChanged],
  submitJob: [
    FailureType.Unauthorized,
    FailureType.Forbidden,
    FailureType.RateLimited,
    FailureType.InvalidRequest,
    FailureType.NotFound,
    FailureType.SubmitUnknown,
    FailureType.GatewayUnreachable,
  ],
  checkJob: [FailureType.Unauthorized, FailureType.Forbidden, FailureType.InvalidRequest],
  stopJob: [FailureType.Unauthorized, FailureType.Forbidden, FailureType.InvalidRequest],
  enhancePrompt: [
    FailureType.Unauthorized,
    FailureType.Forbidden,
    FailureType.InvalidRequest,
    FailureType.NotFound,
    FailureType.EnhanceFailed,
  ],
  pollJob: [
    FailureType.Unauthorized,
    FailureType.Forbidden,
    FailureType.NotFound,
    FailureType.InvalidRequest,
  ],
} as const satisfies Record<string, readonly FailureType[]>;
export type ClassifiedActivity = keyof typeof NON_RETRYABLE;

export function isNonRetryable(activity: ClassifiedActivity, type: string): boolean {
  return (NON_RETRYABLE[activity] as readonly string[]).includes(type);
}

/** The retry policies the workflows give their activities. */
/**
 * readRows' timeouts beside the batch's activity timeout: a first read of a big root's request index takes
 * longer than one short call (docs/benchmarks.md), and heartbeats as it goes, so a crashed worker's read is
 * taken over after the batch's activity timeout while a long one runs to its end.
 */
export const READ_ROWS_START_TO_CLOSE_MS = 10 * 60_000;

export const RETRY_POLICIES = {
  /**
   * readRows and recordResults: about a minute of attempts (another worker may take one), then the batch
   * pauses with the reason and tries again on resume.
   */
  batch: {
    initialInterval: '1s',
    maximumInterval: '20s',
    maximumAttempts: 6,
    nonRetryableErrorTypes: [...NON_RETRYABLE.readRows],
  },
  submitJob: {
    initialInterval: '2s',
    backoffCoefficient: 2,
    maximumInterval: '2m',
    nonRetryableErrorTypes: [...NON_RETRYABLE.submitJob],
  },
  /** Polls are the attempts of one activity; each attempt's failure sets the delay before the next. */
  pollJob: (intervalMs: number): RetryPolicy => ({
    initialInterval: intervalMs,
    backoffCoefficient: 1,
    nonRetryableErrorTypes: [...NON_RETRYABLE.pollJob],
  }),
  /**
   * A notice's delivery to one URL: about 15 minutes of attempts (10 s each at most, 2 s apart growing to
   * 5 min), then it is given up and the batch's `status` says so. The batch never waits for it.
   */
  deliverNotice: {
    initialInterval: '2s',
    backoffCoefficient: 2,
    maximumInterval: '5m',
    maximumAttempts: 10,
  },
  /** Composing a notice reads the batch's files: a few attempts, then it is sent with what the batch knew. */
  composeNotice: {
    initialInterval: '1s',
    maximumInterval: '10s',
    maximumAttempts: 3,
  },
  /** One status check of a known job: transient errors retried, auth and bad requests to the workflow. */
  checkJob: {
    initialInterval: '2s',
    backoffCoefficient: 2,
    maximumInterval: '1m',
    // About 4 minutes of bad answers, then the row fails with the job id kept (a re-run checks again).
    maximumAttempts: 8,
    nonRetryableErrorTypes: [...NON_RETRYABLE.checkJob],
  },
  /**
   * Stopping a job the row no longer waits for (a cancel, a deadline): a few tries in about half a minute, then
   * the row says its job may still bill. Bounded, so a cancelled batch ends soon.
   */
  stopJob: {
    initialInterval: '2s',
    backoffCoefficient: 2,
    maximumInterval: '15s',
    maximumAttempts: 4,
    nonRetryableErrorTypes: [...NON_RETRYABLE.stopJob],
  },
  /**
   * A prompt's rewrite: a 429 comes back after its Retry-After (nextRetryDelay); the activity itself bounds its
   * 429s, its failed requests and its attempts in all (activities/enhance.ts), then the row ends
   * `enhance_failed`.
   */
  enhancePrompt: {
    initialInterval: '1s',
    backoffCoefficient: 2,
    maximumInterval: '30s',
    nonRetryableErrorTypes: [...NON_RETRYABLE.enhancePrompt],
  },
  downloadVideo: { initialInterval: '2s', backoffCoefficient: 2, maximumAttempts: 6 },
} satisfies Record<string, RetryPolicy | ((intervalMs: number) => RetryPolicy)>;
