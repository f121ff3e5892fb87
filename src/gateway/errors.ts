// Errors of the gateway client and the request pacer. Gateway errors form one hierarchy keyed by HTTP status
// (as in openai-node); their messages never contain the API key, because they end up in workflow history.

/** Thrown by the worker's request pacer when a call would wait longer than its caller can; nothing was sent. */
export class PacerBusyError extends Error {
  override name = 'PacerBusyError';
  constructor(readonly retryAfterMs: number) {
    super(`the worker's request pacer is busy; try again in ${Math.ceil(retryAfterMs / 1000)} s`);
  }
}

/** Base of all errors raised by the gateway client; `status` is the HTTP status when there was a response. */
export class GatewayError extends Error {
  override name = 'GatewayError';
  /** The gateway's machine code (`error.code`), when it sent one. */
  readonly code: string | undefined;
  constructor(
    message: string,
    readonly status?: number,
    code?: string,
  ) {
    super(message);
    this.code = code;
  }
}

/** Thrown by the gateway client on 401: the key is missing or invalid. */
export class AuthenticationError extends GatewayError {
  override name = 'AuthenticationError';
}

/** Thrown by the gateway client on 403: the key is disabled or lacks access to the model. */
export class PermissionDeniedError extends GatewayError {
  override name = 'PermissionDeniedError';
}

/** Thrown by the gateway client on 404: unknown job id or path. */
export class NotFoundError extends GatewayError {
  override name = 'NotFoundError';
}

/** Thrown by the gateway client on other 4xx: the request itself is invalid and retrying cannot help. */
export class BadRequestError extends GatewayError {
  override name = 'BadRequestError';
}

/** Thrown by the gateway client on 429; `retryAfterMs` is what the gateway asked us to wait, when it said. */
export class RateLimitError extends GatewayError {
  override name = 'RateLimitError';
  constructor(
    message: string,
    readonly retryAfterMs: number | undefined,
    code?: string,
  ) {
    super(message, 429, code);
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

/** Thrown by the gateway client when the connection failed or was dropped before a full response. */
export class ConnectionError extends GatewayError {
  override name = 'ConnectionError';
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
): GatewayError {
  if (statusCode === 401) return new AuthenticationError(message, statusCode, code);
  if (statusCode === 403) return new PermissionDeniedError(message, statusCode, code);
  if (statusCode === 404) return new NotFoundError(message, statusCode, code);
  if (statusCode === 429) return new RateLimitError(message, retryAfterMs, code);
  if (statusCode >= 500) return new ServerError(message, statusCode, code);
  return new BadRequestError(message, statusCode, code);
}
