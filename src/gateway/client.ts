// The Model Gateway client (undici + zod). It makes exactly one HTTP call per method call: retry decisions
// belong to Temporal (activity retries and durable timers), so every outcome surfaces as a value or a typed
// error from errors.ts. Text from the gateway is redacted (redact.ts) before it goes into any value or error.
import { request, type Dispatcher } from 'undici';
import { z } from 'zod';
import type { GatewaySettings } from '../config';
import { DEFAULT_RETRY_AFTER_MS } from '../contract/failures';
import {
  AuthenticationError,
  ConnectionError,
  errorForStatus,
  GatewayError,
  KeyRefusedError,
  MalformedResponseError,
  NotSentError,
  PermissionDeniedError,
  RateLimitError,
  TimeoutError,
  WorkerStoppingError,
} from './errors';
import { readChatAnswer, type ChatAnswer, type ChatMessage } from './chat';
import { RetryAfterHolds, type CallKind } from './retry-after-hold';
import { redactSecrets } from './redact';
import { readRetryAfter } from './retry-after';
import { canonicalStatus, type CanonicalStatus } from './status';

export interface GenerationRequest {
  model: string;
  input: Record<string, unknown>;
  parameters?: Record<string, unknown>;
}

export interface JobState {
  id: string;
  status: CanonicalStatus;
  /** The status string exactly as the gateway sent it. */
  rawStatus: string;
  url?: string;
  error?: { code: string; message: string };
  /** The gateway's `x-request-id` of the answer, when it sent one. */
  requestId?: string;
}

/** A 2xx answer: its JSON body and the gateway's request id. */
interface Answer {
  json: unknown;
  requestId: string | undefined;
}

const errorBody = z.object({
  error: z.object({ code: z.string().optional(), message: z.string().optional() }),
});
const jobBody = z.looseObject({
  id: z.string().min(1),
  status: z.string().min(1),
  // A `completed` job without a usable URL is the caller's to judge (the row ends `no_video_url`), not a
  // transient error to retry forever.
  data: z.array(z.looseObject({ url: z.string().optional() })).optional(),
  error: z.looseObject({ code: z.string().optional(), message: z.string().optional() }).nullish(),
});
const modelsBody = z.looseObject({ data: z.array(z.looseObject({ id: z.string() })) });

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

/** How one call may go: all optional. */
export interface CallOptions {
  /** Longest wait for a Retry-After hold of this worker (NotSentError beyond it, nothing sent). */
  maxWaitMs?: number;
  /**
   * Epoch ms by which the answer must be in: the HTTP timeout is clamped to it, so an activity's call never
   * outlives its attempt (and two attempts' POSTs never overlap). Too close: NotSentError, nothing sent.
   */
  sendBy?: number;
  /** When the caller was last told to go on after a refused key (a resume); later than the refusal lifts it. */
  unblockedAt?: number;
  /**
   * Awaited right before the request is sent (after any hold): the submit activity records that it is sending
   * there. If it throws, nothing is sent and its error is the call's.
   */
  beforeSend?: () => void | Promise<void>;
}

/** Most of a non-JSON error body that goes into a message. */
const MAX_ERROR_TEXT = 200;
/** Most of a job status that goes into a message. */
const MAX_STATUS_TEXT = 100;

/** A response header's value (the first, if sent more than once). */
function header(raw: string | string[] | undefined): string | undefined {
  return Array.isArray(raw) ? raw[0] : raw;
}

/** Below this much time left, a call is not sent at all: it could not get an answer in time. */
const MIN_SEND_MS = 250;

export class GatewayClient {
  /** This worker's Retry-After holds, per kind: the worker makes one client, shared by all its activities. */
  readonly holds = new RetryAfterHolds();
  /** Told of every request sent (the gateway worker reports them to the rate-budget learner). */
  onRequest: ((kind: CallKind) => void) | undefined;
  /** The key the gateway refused (401/403) and when: calls with it are refused here until it is lifted. */
  private refusal: { key: string; at: number; status: number; message: string } | undefined;
  /** Set by stop(): from then on no request is sent. */
  private stopping = false;

  constructor(private readonly options: GatewaySettings) {}

  /** How long one status or models call may take (GATEWAY_TIMEOUT_MS). */
  get timeoutMs(): number {
    return this.options.timeoutMs;
  }

  /** How long a submit may take before its outcome counts as unknown (GATEWAY_SUBMIT_TIMEOUT_MS). */
  get submitTimeoutMs(): number {
    return this.options.submitTimeoutMs ?? this.options.timeoutMs;
  }

  /**
   * The worker is stopping: calls already on the wire go on to their answer (never aborted: a submit's answer
   * is its job id), every call not yet sent fails with WorkerStoppingError, those waiting out a hold
   * included, and nothing new is sent by this client again.
   */
  stop(): void {
    if (this.stopping) return;
    this.stopping = true;
    this.holds.close((kind) => new WorkerStoppingError(kind === 'submit' ? 'submit' : 'status check'));
  }

  /**
   * Submits one job. `idempotencyKey` must be the same on every retry of the same row. Errors say whether
   * a job may exist (`outcomeUnknown`).
   */
  async submit(
    body: GenerationRequest,
    idempotencyKey: string,
    options: CallOptions = {},
  ): Promise<JobState> {
    const answer = await this.call('POST', '/videos/generations', options, body, {
      'idempotency-key': idempotencyKey,
    });
    // A 2xx whose body cannot be read may still be a new job: toJobState's MalformedResponseError is unknown.
    return this.toJobState(answer);
  }

  async getJob(jobId: string, options: CallOptions = {}): Promise<JobState> {
    const path = `/videos/generations/${encodeURIComponent(jobId)}`;
    return this.toJobState(await this.call('GET', path, options));
  }

  /**
   * One chat completion (POST /chat/completions). A POST, so it shares the submissions' Retry-After hold: a 429
   * on it is the same gateway's limit. The answer's text, or what is wrong with it (chat.ts); the caller
   * decides what a bad answer does.
   */
  async chat(
    model: string,
    messages: ChatMessage[],
    options: CallOptions = {},
  ): Promise<ChatAnswer & { requestId?: string }> {
    const { json, requestId } = await this.call('POST', '/chat/completions', options, { model, messages });
    const answer = readChatAnswer(json);
    // Gateway text goes into the row's message and the kept rewrite: redacted like every other answer.
    const redacted =
      'problem' in answer
        ? { problem: this.redact(answer.problem) }
        : { ...answer, content: this.redact(answer.content) };
    return { ...redacted, ...(requestId ? { requestId } : {}) };
  }

  async listModels(): Promise<string[]> {
    const { json, requestId } = await this.call('GET', '/models', {});
    const parsed = modelsBody.safeParse(json);
    if (!parsed.success)
      throw new MalformedResponseError(
        'GET /models returned an unexpected body',
        undefined,
        undefined,
        requestId,
      );
    return parsed.data.data.map((m) => m.id);
  }

  private toJobState({ json, requestId }: Answer): JobState {
    const parsed = jobBody.safeParse(json);
    if (!parsed.success)
      throw new MalformedResponseError(
        `job response has an unexpected shape: ${parsed.error.issues[0]?.message}`,
        undefined,
        undefined,
        requestId,
      );
    const { id, data, error } = parsed.data;
    // The status goes into messages ("still <status> at its deadline"): gateway text, redacted and bounded.
    const rawStatus = this.redact(parsed.data.status).slice(0, MAX_STATUS_TEXT);
    const status = canonicalStatus(rawStatus);
    const raw = data?.[0]?.url;
    const url = raw && URL.canParse(raw) ? raw : undefined;
    return {
      id,
      status,
      rawStatus,
      ...(url ? { url } : {}),
      ...(error
        ? {
            error: {
              code: this.redact(error.code ?? 'unknown'),
              message: this.redact(error.message ?? ''),
            },
          }
        : {}),
      ...(requestId ? { requestId } : {}),
    };
  }

  /** The gateway's request id as it goes into messages: printable, bounded, and never the key. */
  private requestIdOf(raw: string | undefined): string | undefined {
    if (!raw || !/^[\x21-\x7e]{1,128}$/.test(raw)) return undefined;
    return this.redact(raw);
  }

  /**
   * Gateway text as it may go into messages (redact.ts): the key, any `sk-` token, any bearer token and any
   * echoed Authorization header value are replaced. Whole text only: cut after this, never before.
   */
  private redact(text: string): string {
    return redactSecrets(text, this.options.apiKey());
  }

  /**
   * A refused key stops at once: after a 401/403, every call with the same key is refused here (nothing
   * sent), calls waiting out a hold included, until the key changes (a rotated key file) or a call
   * comes from a caller unblocked after the refusal (the batch was resumed). Throws KeyRefusedError.
   */
  private checkKey(what: string, unblockedAt: number | undefined): void {
    const refusal = this.refusal;
    if (!refusal) return;
    if (this.options.apiKey() !== refusal.key || (unblockedAt !== undefined && unblockedAt > refusal.at)) {
      this.refusal = undefined;
      return;
    }
    throw new KeyRefusedError(
      `${what}: not sent: the gateway refused this API key at ${new Date(refusal.at).toISOString()} ` +
        `(${refusal.message}); waiting for a new key or a resume`,
      refusal.status,
    );
  }

  /** Every request goes through here: the key check, Retry-After holds, 429s and refusals. */
  private async call(
    method: 'GET' | 'POST',
    path: string,
    options: CallOptions,
    body?: unknown,
    extraHeaders: Record<string, string> = {},
  ): Promise<Answer> {
    const what = `${method} ${path}`;
    if (this.stopping) throw new WorkerStoppingError(what);
    this.checkKey(what, options.unblockedAt);
    const kind: CallKind = method === 'POST' ? 'submit' : 'status';
    await this.holds.wait(kind, options.maxWaitMs ?? Infinity);
    // Again after the hold: a call that waited must not go out once the worker stops, or with a key refused
    // meanwhile.
    if (this.stopping) throw new WorkerStoppingError(what);
    this.checkKey(what, options.unblockedAt);
    const limit = method === 'POST' ? this.submitTimeoutMs : this.options.timeoutMs;
    const left = (options.sendBy ?? Infinity) - Date.now();
    if (left < MIN_SEND_MS)
      throw new NotSentError(1000, `${what}: not sent: too little time left in this attempt`);
    const key = this.options.apiKey();
    await options.beforeSend?.();
    // Measured after beforeSend (a claim of the request, a heartbeat recorded on the server take time), so the
    // answer is still due within the attempt.
    const timeoutMs = Math.max(
      Math.min(limit, (options.sendBy ?? Infinity) - Date.now()),
      Math.min(limit, MIN_SEND_MS),
    );
    // The stop came while the submit recorded that it is sending: still not sent. ConnectionError "nothing
    // sent", so the submit activity clears that record (activities/jobs.ts) and Temporal retries it elsewhere.
    if (this.stopping)
      throw new ConnectionError(
        `${what}: not sent: this worker is stopping; another worker takes it over`,
        true,
      );
    this.onRequest?.(kind);
    try {
      return await this.send(method, path, body, extraHeaders, key, timeoutMs);
    } catch (err) {
      const error = err instanceof GatewayError ? err : new GatewayError(this.redact(String(err)));
      if (error instanceof RateLimitError)
        this.holds.hold(kind, error.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS);
      if (error instanceof AuthenticationError || error instanceof PermissionDeniedError) {
        this.refusal ??= { key, at: Date.now(), status: error.status ?? 403, message: error.message };
      }
      throw error;
    }
  }

  private async send(
    method: string,
    path: string,
    body: unknown,
    extraHeaders: Record<string, string>,
    key: string,
    timeoutMs: number,
  ): Promise<Answer> {
    const what = `${method} ${path}`;
    let response: Dispatcher.ResponseData;
    let text: string;
    try {
      response = await request(`${this.options.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...extraHeaders,
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
    const requestId = this.requestIdOf(header(response.headers['x-request-id']));
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

    const parsedError = errorBody.safeParse(json);
    const rawCode = parsedError.success ? parsedError.data.error.code : undefined;
    // The code becomes a row's errorCode: gateway text like the message.
    const code = rawCode === undefined ? undefined : this.redact(rawCode);
    // Redacted before it is cut: a key straddling the cut would otherwise survive in part.
    const detail = parsedError.success
      ? this.redact(parsedError.data.error.message ?? rawCode ?? '')
      : this.redact(text).slice(0, MAX_ERROR_TEXT);
    const message = `${what}: ${statusCode}${detail ? ` ${detail}` : ''}`;
    const retryAfter = header(response.headers['retry-after']);
    const wait = statusCode === 429 ? readRetryAfter(retryAfter) : undefined;
    throw errorForStatus(
      statusCode,
      message,
      code,
      wait?.ms,
      retryAfter === undefined ? undefined : this.redact(retryAfter).slice(0, MAX_STATUS_TEXT),
      requestId,
      wait?.clamped ? wait.askedMs : undefined,
    );
  }
}
