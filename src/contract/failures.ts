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
  /** The worker's request pacer had no slot in time; retried later, nothing was sent. */
  PacerBusy: 'PacerBusy',
  CsvChanged: 'CsvChanged',
  DownloadFailed: 'DownloadFailed',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/** Without a Retry-After the spec gives no wait; one second is the smallest a seconds header says. */
export const DEFAULT_RETRY_AFTER_MS = 1000;

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
export const RETRY_POLICIES = {
  /** readRows and recordResults: work on the worker's own disk. */
  batch: {
    initialInterval: '1s',
    maximumInterval: '1m',
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
  downloadVideo: { initialInterval: '2s', backoffCoefficient: 2, maximumAttempts: 6 },
} satisfies Record<string, RetryPolicy | ((intervalMs: number) => RetryPolicy)>;
