// The one place where activities turn errors into Temporal failures: which type, retried by Temporal or not
// (contract/failures.ts lists which types each activity never retries), and how long until the next attempt.
import { ApplicationFailure } from '@temporalio/activity';
import { ApplicationFailureCategory } from '@temporalio/common';
import {
  DEFAULT_RETRY_AFTER_MS,
  FailureType,
  isNonRetryable,
  type ClassifiedActivity,
} from '../contract/failures';
import type { DownloadError, PathNotAllowedError } from '../errors';
import { EXPIRED_URL_STATUSES } from '../results/download';
import {
  AuthenticationError,
  BadRequestError,
  GatewayError,
  KeyRefusedError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  type NotSentError,
} from '../gateway/errors';

/**
 * The failure type of an error, and the details the workflow needs to act on it. A submit whose outcome is
 * unknown (see GatewayError.outcomeUnknown) is SubmitUnknown whatever the error, so the workflow applies
 * the policy instead of Temporal re-sending it.
 */
function classify(err: unknown, activity: ClassifiedActivity): { type: string; details?: object } {
  // Errors other than GatewayError come from before the request (the client wraps whatever sending throws).
  if (activity === 'submitJob' && err instanceof GatewayError && err.outcomeUnknown)
    return { type: FailureType.SubmitUnknown, details: { code: 'submit_unknown' } };
  if (err instanceof KeyRefusedError)
    return { type: err.status === 401 ? FailureType.Unauthorized : FailureType.Forbidden };
  if (err instanceof AuthenticationError) return { type: FailureType.Unauthorized };
  if (err instanceof PermissionDeniedError) return { type: FailureType.Forbidden };
  if (err instanceof NotFoundError)
    return { type: FailureType.NotFound, details: { code: err.code ?? 'not_found' } };
  if (err instanceof BadRequestError)
    return { type: FailureType.InvalidRequest, details: { code: err.code ?? 'invalid_request' } };
  if (err instanceof RateLimitError) return { type: FailureType.RateLimited };
  return { type: err instanceof GatewayError ? err.name : 'Error' };
}

/**
 * A failed gateway call of `activity`. `retryDelayMs` is the delay before Temporal's next attempt of a
 * transient error (the poll schedule); default: the retry policy's. A 429 waits for its Retry-After, no longer
 * (the check was due; waiting for the next poll delay too would leave rate budget unused): on submit the
 * workflow holds the batch that long, on poll Temporal waits that long. The details carry the gateway's
 * request id beside the code (`{ code, ..., requestId }`), so the row that fails can quote it.
 */
export function toFailure(
  err: unknown,
  activity: ClassifiedActivity,
  retryDelayMs?: number,
): ApplicationFailure {
  const message = err instanceof Error ? err.message : String(err);
  const { type, details } = classify(err, activity);
  const rateLimitWaitMs =
    err instanceof RateLimitError ? (err.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS) : undefined;
  const requestId = err instanceof GatewayError ? err.requestId : undefined;
  const withRequestId = (d: object | undefined) =>
    requestId === undefined ? d : { ...(d ?? {}), requestId };
  if (isNonRetryable(activity, type)) {
    const shown = withRequestId(rateLimitWaitMs === undefined ? details : { retryAfterMs: rateLimitWaitMs });
    return ApplicationFailure.create({
      type,
      message,
      nonRetryable: true,
      details: shown === undefined ? undefined : [shown],
      // An unknown submit outcome is handled by the workflow and reported on the row: no SDK warning stack.
      ...(type === FailureType.SubmitUnknown ? { category: ApplicationFailureCategory.BENIGN } : {}),
    });
  }
  const nextRetryDelay = rateLimitWaitMs ?? retryDelayMs;
  const shown = withRequestId(details);
  return ApplicationFailure.create({
    type,
    message,
    ...(shown !== undefined ? { details: [shown] } : {}),
    ...(nextRetryDelay !== undefined ? { nextRetryDelay } : {}),
  });
}

/**
 * A previous attempt of this submit was sending when it ended (worker crash or attempt timeout mid-POST):
 * the gateway may have made a job, so the workflow decides (resend with the same key, or fail the row).
 */
export function submitUnknown(message: string): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.SubmitUnknown,
    message,
    nonRetryable: true,
    details: [{ code: 'submit_unknown' }],
    category: ApplicationFailureCategory.BENIGN,
  });
}

/**
 * Nothing could be sent to the gateway for longer than the batch allows: the workflow tells the batch (which
 * pauses with the reason) and tries again later. Nothing was sent, so nothing can have been billed.
 */
export function gatewayUnreachable(message: string, sinceMs: number): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.GatewayUnreachable,
    message,
    nonRetryable: true,
    details: [{ sinceMs }],
    category: ApplicationFailureCategory.BENIGN,
  });
}

/** Nothing was sent (a Retry-After hold, too little time): come back when it said, not counted as a failure. */
export function notSent(err: NotSentError): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.NotSent,
    message: err.message,
    nextRetryDelay: err.retryAfterMs,
    category: ApplicationFailureCategory.BENIGN,
  });
}

/**
 * The job is not finished (or not due for a check yet): the normal case of polling by retries, so a benign
 * failure (no warning logs, no failure metrics) whose delay is the poll schedule's.
 */
export function jobNotFinished(message: string, nextRetryDelay: number): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.JobNotFinished,
    message,
    nextRetryDelay,
    category: ApplicationFailureCategory.BENIGN,
  });
}

/** The CSV is not the file the batch was started from; the batch cannot go on until it is restored. */
export function csvChanged(message: string): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.CsvChanged,
    message,
    nonRetryable: isNonRetryable('readRows', FailureType.CsvChanged),
  });
}

/**
 * A video could not be fetched or verified; retried only when trying again can help. A URL that answered
 * 403, 404 or 410 is `UrlExpired` with its `httpStatus`, never retried: the workflow asks the job for a fresh
 * URL instead.
 */
export function downloadFailed(err: DownloadError): ApplicationFailure {
  if (err.httpStatus !== undefined && EXPIRED_URL_STATUSES.includes(err.httpStatus))
    return ApplicationFailure.create({
      type: FailureType.UrlExpired,
      message: err.message,
      nonRetryable: true,
      details: [{ httpStatus: err.httpStatus }],
      category: ApplicationFailureCategory.BENIGN,
    });
  return ApplicationFailure.create({
    type: FailureType.DownloadFailed,
    message: err.message,
    nonRetryable: !err.retryable,
  });
}

/**
 * Workflow input named a path outside this worker's roots. Retried as the activity's policy says: another
 * worker, with other roots, may take the next attempt (which worker picks a task must not decide a row's
 * fate); the batch's own activities have bounded retries and then pause the batch with this message.
 */
export function pathNotAllowed(err: PathNotAllowedError): ApplicationFailure {
  return ApplicationFailure.create({ type: FailureType.PathNotAllowed, message: err.message });
}
