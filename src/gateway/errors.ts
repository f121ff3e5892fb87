// Errors of the gateway client. Gateway errors form one hierarchy keyed by HTTP status
// (as in openai-node); their messages never contain the API key, because they end up in workflow history.
// Each says whether, for a submit, the outcome is unknown (a job may exist) or known (no job was made): an
// answer that refuses the request proves nothing was created; silence, a reset, a 5xx, an unreadable 2xx or
// a 409 does not (the spec promises neither idempotency nor that a proxy's 5xx means the upstream did
// nothing, and a gateway that honours Idempotency-Key answers 409 while a request with the same key is still
// being processed: that request may be making a job).
import { VidbatchError } from '../errors';

/**
 * A call the client did not send, with when to come back: a Retry-After hold longer than the caller can wait,
 * or too little time left in the attempt for an answer. Nothing was sent, so nothing can have been billed.
 */
export class NotSentError extends Error {
  override name = 'NotSentError';
  constructor(
    readonly retryAfterMs: number,
    message = `not sent; try again in ${Math.ceil(retryAfterMs / 1000)} s`,
  ) {
    super(message);
  }
}

/**
 * The worker is stopping (SIGTERM/SIGINT): a call not yet sent is never sent. A NotSentError, so the activity
 * ends as a benign "come back later" failure and Temporal gives the attempt to another (or the next) worker.
 */
export class WorkerStoppingError extends NotSentError {
  override name = 'WorkerStoppingError';
  constructor(what: string, retryAfterMs = 1000) {
    super(retryAfterMs, `${what}: not sent: this worker is stopping; another worker takes it over`);
  }
}

/** `message (request id <id>)`, or the message alone when the answer had no id. */
export function withRequestId(message: string, requestId: string | undefined): string {
  return requestId ? `${message} (request id ${requestId})` : message;
}

/**
 * Base of all errors raised by the gateway client; `status` is the HTTP status when there was a response.
 * `requestId` is the gateway's `x-request-id` of that response, also at the end of the message, so the
 * gateway's operators can find the request from any log line or row that quotes the error.
 */
export class GatewayError extends VidbatchError {
  override name = 'GatewayError';
  /** The gateway's machine code (`error.code`), when it sent one. */
  readonly code: string | undefined;
  readonly requestId: string | undefined;
  constructor(
    message: string,
    readonly status?: number,
    code?: string,
    requestId?: string,
  ) {
    super(withRequestId(message, requestId));
    this.code = code;
    this.requestId = requestId;
  }

  /**
   * For a submit: true when the request may have created a job (no answer that proves otherwise). Errors of
   * unknown origin count as unknown: being wrong that way costs at most a reported resend.
   */
  get outcomeUnknown(): boolean {
    return true;
  }
}

/** An answer that refused the request: the gateway made no job. */
abstract class RefusedError extends GatewayError {
  override get outcomeUnknown(): boolean {
    return false;
  }
}

/** Thrown by the gateway client on 401: the key is missing or invalid. */
export class AuthenticationError extends RefusedError {
  override name = 'AuthenticationError';
}

/** Thrown by the gateway client on 403: the key is disabled or lacks access to the model. */
export class PermissionDeniedError extends RefusedError {
  override name = 'PermissionDeniedError';
}

/** Thrown by the gateway client on 404: unknown job id or path. */
export class NotFoundError extends RefusedError {
  override name = 'NotFoundError';
}

/** Thrown by the gateway client on other 4xx: the request itself is invalid and retrying cannot help. */
export class BadRequestError extends RefusedError {
  override name = 'BadRequestError';
}

/**
 * Thrown by the gateway client on 409. For a status check a refusal like any other 4xx; for a submit it is
 * the answer of an idempotent gateway to a key whose first request is still in progress, so a job may exist.
 */
export class ConflictError extends BadRequestError {
  override name = 'ConflictError';
  override get outcomeUnknown(): boolean {
    return true;
  }
}

/** Thrown by the gateway client on 429; `retryAfterMs` is what the gateway asked us to wait, when it said. */
export class RateLimitError extends RefusedError {
  override name = 'RateLimitError';
  constructor(
    message: string,
    readonly retryAfterMs: number | undefined,
    code?: string,
    /** The Retry-After header as sent, when it could not be read (the default wait applies). */
    readonly unreadableRetryAfter?: string,
    requestId?: string,
    /** What the gateway asked for when it was over the cap (retryAfterMs is then the cap). */
    readonly clampedFromMs?: number,
  ) {
    super(message, 429, code, requestId);
  }
}

/** Thrown by the gateway client on 5xx. */
export class ServerError extends GatewayError {
  override name = 'ServerError';
}

/** Thrown by the gateway client when no response arrived in time; the request may or may not have been acted on. */
export class TimeoutError extends GatewayError {
  override name = 'TimeoutError';
}

/**
 * Thrown by the gateway client when the connection failed or was dropped before a full response;
 * `beforeSending` when it never connected (refused, no such host), so nothing reached the gateway.
 */
export class ConnectionError extends GatewayError {
  override name = 'ConnectionError';
  constructor(
    message: string,
    readonly beforeSending = false,
  ) {
    super(message);
  }

  override get outcomeUnknown(): boolean {
    return !this.beforeSending;
  }
}

/**
 * Thrown by the gateway client, without sending anything, for a call with an API key the gateway refused
 * (401/403) until the key changes or the batch is resumed; `status` is the refusal's, so it pauses the same way.
 */
export class KeyRefusedError extends RefusedError {
  override name = 'KeyRefusedError';
}

/** Thrown by the gateway client when a 2xx body is not JSON or not of the documented shape. */
export class MalformedResponseError extends GatewayError {
  override name = 'MalformedResponseError';
}

/** The error for a non-2xx answer: one class per HTTP status class. */
export function errorForStatus(
  statusCode: number,
  message: string,
  code: string | undefined,
  retryAfterMs: number | undefined,
  retryAfterHeader?: string,
  requestId?: string,
  clampedFromMs?: number,
): GatewayError {
  if (statusCode === 401) return new AuthenticationError(message, statusCode, code, requestId);
  if (statusCode === 403) return new PermissionDeniedError(message, statusCode, code, requestId);
  if (statusCode === 404) return new NotFoundError(message, statusCode, code, requestId);
  if (statusCode === 409) return new ConflictError(message, statusCode, code, requestId);
  if (statusCode === 429)
    return new RateLimitError(
      message,
      retryAfterMs,
      code,
      retryAfterMs === undefined && retryAfterHeader !== undefined ? retryAfterHeader : undefined,
      requestId,
      clampedFromMs,
    );
  if (statusCode >= 500) return new ServerError(message, statusCode, code, requestId);
  return new BadRequestError(message, statusCode, code, requestId);
}
