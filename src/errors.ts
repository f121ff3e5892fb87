// Every error vidbatch throws on purpose. Gateway errors form one hierarchy keyed by HTTP status (as in
// openai-node); their messages never contain the API key, because they end up in workflow history.

/** Thrown by config loading when a required environment variable is missing or malformed. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Thrown by findTemporalCli when no Temporal CLI could be found or provisioned; lists what was tried. */
export class TemporalCliNotFoundError extends Error {
  override name = 'TemporalCliNotFoundError';
  constructor(readonly tried: string[]) {
    super(
      [
        'No Temporal CLI could be found or provisioned. Tried:',
        ...tried.map((t) => `  - ${t}`),
        'Fix one of: set TEMPORAL_CLI_PATH to a temporal binary; put `temporal` on PATH;',
        '  install Go (https://go.dev/dl) so vidbatch can build it with `go install`;',
        '  or give this machine internet access for the SDK download.',
      ].join('\n'),
    );
  }
}

/** Thrown by the dev-server launcher when the server exits or does not become ready in time. */
export class DevServerError extends Error {
  override name = 'DevServerError';
}

/** One problem found in an input CSV: where it is and why it is wrong. */
export interface CsvProblem {
  file: string;
  line: number;
  column: string;
  reason: string;
}

/** Thrown by the CSV loader when the file has any bad row; carries every problem found, not only the first. */
export class CsvValidationError extends Error {
  override name = 'CsvValidationError';
  constructor(readonly problems: CsvProblem[]) {
    super(
      `${problems.length} problem${problems.length === 1 ? '' : 's'} in the input; nothing was submitted:\n` +
        problems.map((p) => `  ${p.file}:${p.line} [${p.column}] ${p.reason}`).join('\n'),
    );
  }
}

/** Thrown by downloadVerified when a video cannot be fetched or fails verification; `retryable` says whether trying again can help. */
export class DownloadError extends Error {
  override name = 'DownloadError';
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

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
