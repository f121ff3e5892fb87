// One HTTP exchange of the gateway transport (client.ts): the request as the adapter shaped it, and its answer
// as a 2xx body or a typed error of errors.ts. Everything that decides whether to send (key refusals, holds,
// the attempt's time) is the client's; this only sends, once, and reads.
import { request, type Dispatcher } from 'undici';
import { ConnectionError, errorForStatus, MalformedResponseError, TimeoutError } from './errors';
import type { HttpCall } from './provider';
import { publishedRate } from './rate-limit-headers';
import { MAX_RETRY_AFTER_MS, readRetryAfter, type RetryAfter } from './retry-after';

/** A 2xx answer: its JSON body and the gateway's request id. */
export interface Answer {
  json: unknown;
  requestId: string | undefined;
}

/** Connection failures that happen before a byte of the request leaves: the gateway cannot have seen it. */
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'ERR_INVALID_URL',
]);

/** Most of a non-JSON error body that goes into a message. */
const MAX_ERROR_TEXT = 200;
/** Most of a Retry-After value that goes into a message. */
const MAX_HEADER_TEXT = 100;

/** A response header's value (the first, if sent more than once). */
function header(raw: string | string[] | undefined): string | undefined {
  return Array.isArray(raw) ? raw[0] : raw;
}

export interface SendArgs {
  /** `METHOD path`, as messages name the call. */
  what: string;
  url: string;
  call: HttpCall;
  /** The headers that carry the key. */
  headers: Record<string, string>;
  timeoutMs: number;
  /** The provider's reading of an error body. */
  readError: (json: unknown) => { code?: string; message?: string } | undefined;
  /** The wait a 429's body asks for (ms), for a provider that sends no Retry-After; read only without one. */
  readRetryAfter?: (json: unknown) => number | undefined;
  /** The key and tokens out of gateway text (redact.ts). */
  redact: (text: string) => string;
  /** Told the rate limit an answer publishes (rate-limit-headers.ts), 429s included. */
  onPublishedRate?: (rps: number) => void;
}

/**
 * The wait a 429's body asks for, capped as a Retry-After is: some providers word it only in the body
 * ("resets in ~30s"). Undefined when the provider reads none, or reads something that is not a wait.
 */
function bodyWait(
  json: unknown,
  read: ((json: unknown) => number | undefined) | undefined,
): RetryAfter | undefined {
  if (json === undefined || !read) return undefined;
  const askedMs = read(json);
  if (askedMs === undefined || !Number.isFinite(askedMs) || askedMs < 0) return undefined;
  const ms = Math.round(askedMs);
  return ms > MAX_RETRY_AFTER_MS
    ? { ms: MAX_RETRY_AFTER_MS, clamped: true, askedMs: ms }
    : { ms, clamped: false, askedMs: ms };
}

/** The gateway's request id as it goes into messages: printable, bounded, and never the key. */
function requestIdOf(raw: string | undefined, redact: (text: string) => string): string | undefined {
  if (!raw || !/^[\x21-\x7e]{1,128}$/.test(raw)) return undefined;
  return redact(raw);
}

export async function sendCall({
  what,
  url,
  call: { method, body, headers = {} },
  headers: auth,
  timeoutMs,
  readError,
  readRetryAfter: readBodyWait,
  redact,
  onPublishedRate,
}: SendArgs): Promise<Answer> {
  let response: Dispatcher.ResponseData;
  let text: string;
  try {
    response = await request(url, {
      method,
      headers: {
        ...auth,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    text = await response.body.text();
  } catch (err) {
    const e = err as { name?: string; code?: string; cause?: { code?: string } };
    if (
      e.name === 'TimeoutError' ||
      e.name === 'AbortError' ||
      e.code === 'UND_ERR_HEADERS_TIMEOUT' ||
      e.code === 'UND_ERR_BODY_TIMEOUT'
    ) {
      throw new TimeoutError(
        `${what}: no response within ${timeoutMs} ms (the request may have been processed)`,
      );
    }
    const code = e.code ?? e.cause?.code;
    const beforeSending = code !== undefined && NOT_SENT_CODES.has(code);
    throw new ConnectionError(
      `${what}: connection failed (${code ?? e.name ?? 'unknown'})` +
        (beforeSending ? ', nothing sent' : ' (the request may have been processed)'),
      beforeSending,
    );
  }
  const { statusCode } = response;
  const published = onPublishedRate && publishedRate(response.headers);
  if (published !== undefined) onPublishedRate?.(published);
  const requestId = requestIdOf(header(response.headers['x-request-id']), redact);
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    if (statusCode >= 200 && statusCode < 300)
      throw new MalformedResponseError(
        `${what}: response body is not JSON`,
        statusCode,
        undefined,
        requestId,
      );
  }
  if (statusCode >= 200 && statusCode < 300) return { json, requestId };

  const parsedError = json === undefined ? undefined : readError(json);
  const rawCode = parsedError?.code;
  // The code becomes a row's errorCode: gateway text like the message.
  const code = rawCode === undefined ? undefined : redact(rawCode);
  // Redacted before it is cut: a key straddling the cut would otherwise survive in part.
  const detail = parsedError
    ? redact(parsedError.message ?? rawCode ?? '')
    : redact(text).slice(0, MAX_ERROR_TEXT);
  const message = `${what}: ${statusCode}${detail ? ` ${detail}` : ''}`;
  const retryAfter = header(response.headers['retry-after']);
  const wait =
    statusCode !== 429
      ? undefined
      : retryAfter !== undefined
        ? readRetryAfter(retryAfter)
        : bodyWait(json, readBodyWait);
  throw errorForStatus(
    statusCode,
    message,
    code,
    wait?.ms,
    retryAfter === undefined ? undefined : redact(retryAfter).slice(0, MAX_HEADER_TEXT),
    requestId,
    wait?.clamped ? wait.askedMs : undefined,
  );
}
