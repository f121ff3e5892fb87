// Maps gateway errors to Temporal failures: which ones Temporal retries by itself, which ones the workflow
// must see (auth -> pause the batch, 429 on submit -> gate the batch), and how long to wait before a retry.
import { ApplicationFailure } from '@temporalio/activity';
import {
  AuthenticationError,
  BadRequestError,
  GatewayError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
} from '../gateway/errors';
import { FailureType } from '../contract/failures';

export interface FailureOptions {
  /** true: a 429 fails the activity so the workflow can gate the batch; false: Temporal retries after Retry-After. */
  rateLimitToWorkflow: boolean;
  /** Delay before Temporal's next retry of a transient error (the poll schedule); default: the retry policy's. */
  retryDelayMs?: number;
}

export function toFailure(err: unknown, options: FailureOptions): ApplicationFailure {
  const message = err instanceof Error ? err.message : String(err);
  const fail = (type: string, details?: unknown) =>
    ApplicationFailure.create({
      type,
      message,
      nonRetryable: true,
      details: details === undefined ? undefined : [details],
    });
  if (err instanceof AuthenticationError) return fail(FailureType.Unauthorized);
  if (err instanceof PermissionDeniedError) return fail(FailureType.Forbidden);
  if (err instanceof NotFoundError) return fail(FailureType.NotFound, { code: err.code ?? 'not_found' });
  if (err instanceof BadRequestError)
    return fail(FailureType.InvalidRequest, { code: err.code ?? 'invalid_request' });
  if (err instanceof RateLimitError) {
    const retryAfterMs = Math.max(err.retryAfterMs ?? 1000, options.retryDelayMs ?? 0);
    if (options.rateLimitToWorkflow) return fail(FailureType.RateLimited, { retryAfterMs });
    return ApplicationFailure.create({
      type: FailureType.RateLimited,
      message,
      nextRetryDelay: retryAfterMs,
    });
  }
  return ApplicationFailure.create({
    type: err instanceof GatewayError ? err.name : 'Error',
    message,
    ...(options.retryDelayMs !== undefined ? { nextRetryDelay: options.retryDelayMs } : {}),
  });
}
