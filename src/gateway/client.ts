// The gateway transport (undici + zod), for every provider: an adapter (provider.ts) says what a call is in
// its dialect and what the answers mean, and this makes the calls. It makes exactly one HTTP call per method
// call (a check whose answer points at its result makes a second): retry decisions belong to Temporal (activity
// retries and durable timers), so every outcome surfaces as a value or a typed error from errors.ts. Text from
// the gateway is redacted (redact.ts) before it goes into any value or error, and the key goes only to the
// base URL's origin.
import type { GatewaySettings } from '../config';
import { DEFAULT_RETRY_AFTER_MS } from '../contract/failures';
import {
  AuthenticationError,
  BadRequestError,
  ConnectionError,
  GatewayError,
  KeyRefusedError,
  MalformedResponseError,
  NotSentError,
  PermissionDeniedError,
  RateLimitError,
  WorkerStoppingError,
} from './errors';
import { readChatAnswer, type ChatAnswer, type ChatMessage } from './chat';
import type { GenerationRequest, HttpCall, Problem, ProviderAdapter, ProviderJob } from './provider';
import { DEFAULT_PROVIDER } from './providers';
import { RetryAfterHolds, type CallKind } from './retry-after-hold';
import { redactSecrets } from './redact';
import { sendCall, type Answer } from './send-call';
import type { CanonicalStatus } from './status';

export type { GenerationRequest } from './provider';

export interface JobState {
  id: string;
  status: CanonicalStatus;
  /** The status string exactly as the gateway sent it. */
  rawStatus: string;
  /** Absolute: a path the provider gave is resolved against the base URL. */
  url?: string;
  error?: { code: string; message: string };
  /** The gateway's `x-request-id` of the answer, when it sent one. */
  requestId?: string;
}

/**
 * What fetching a provider's own video URL needs: the headers that carry the key, and the base URL they are
 * limited to (results/download.ts sends them only to URLs under it, never after a hop away from it).
 */
export interface VideoAuth {
  base: string;
  headers: Record<string, string>;
}

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

/** Most of a job status that goes into a message. */
const MAX_STATUS_TEXT = 100;

/** Below this much time left, a call is not sent at all: it could not get an answer in time. */
const MIN_SEND_MS = 250;

export class GatewayClient {
  /** This worker's Retry-After holds, per kind: the worker makes one client, shared by all its activities. */
  readonly holds = new RetryAfterHolds();
  /** Told of every request sent (the gateway worker reports them to the rate-budget learner). */
  onRequest: ((kind: CallKind) => void) | undefined;
  /** Told the rate limit the gateway publishes in its answers' headers, when it does (rate-limit-headers.ts). */
  onPublishedRate: ((rps: number) => void) | undefined;
  /** The dialect spoken: the adapter given, else the settings', else the Model Gateway's. */
  readonly provider: ProviderAdapter;
  /** The key the gateway refused (401/403) and when: calls with it are refused here until it is lifted. */
  private refusal: { key: string; at: number; status: number; message: string } | undefined;
  /** Set by stop(): from then on no request is sent. */
  private stopping = false;

  constructor(
    private readonly options: GatewaySettings,
    provider?: ProviderAdapter,
  ) {
    this.provider = provider ?? options.provider ?? DEFAULT_PROVIDER;
  }

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
   * The request as it is sent, and what the provider would refuse in it (validate), or undefined. A row's
   * defaults are the provider's already (the CSV reader fills them in): the request is sent as the row says.
   */
  prepare(request: GenerationRequest): { request: GenerationRequest; problem?: string } {
    const problem = this.provider.validate?.(request);
    return problem ? { request, problem } : { request };
  }

  /**
   * Submits one job. `idempotencyKey` must be the same on every retry of the same row (sent only where the
   * provider takes one). Errors say whether a job may exist (`outcomeUnknown`); a request the provider
   * cannot take is a BadRequestError, nothing sent.
   */
  async submit(
    body: GenerationRequest,
    idempotencyKey: string,
    options: CallOptions = {},
  ): Promise<JobState> {
    const { request, problem } = this.prepare(body);
    if (problem)
      throw new BadRequestError(
        `not sent: ${this.provider.name}: ${problem}`,
        undefined,
        'unsupported_value',
      );
    const answer = await this.call(this.provider.submit(request, idempotencyKey), options);
    // A 2xx whose body cannot be read may still be a new job: the MalformedResponseError is unknown.
    return this.toJobState(this.read(this.provider.readJob, answer), answer.requestId);
  }

  /** One status check; a provider whose completed job keeps its result elsewhere gets a second call for it. */
  async getJob(jobId: string, options: CallOptions = {}): Promise<JobState> {
    const answer = await this.call(this.provider.check(jobId), options);
    const job = this.read(this.provider.readJob, answer);
    if (!job.follow) return this.toJobState(job, answer.requestId);
    const result = await this.call(job.follow.call, options);
    // The result call answers for the same job: its id stays the one the caller holds.
    const followed = this.read(job.follow.read, result);
    return this.toJobState({ ...followed, id: job.id, follow: undefined }, result.requestId);
  }

  /**
   * Stops a job where the provider can (its cancel call), once it answered 2xx: `stopped`, or `requested` where
   * the provider only asks a job in `rawStatus` to stop; undefined when the provider has no way to cancel.
   * Errors as for a status check.
   */
  async cancel(
    jobId: string,
    rawStatus: string,
    options: CallOptions = {},
  ): Promise<'stopped' | 'requested' | undefined> {
    if (!this.provider.cancel) return undefined;
    await this.call(this.provider.cancel(jobId), options);
    return (this.provider.cancelStops?.(rawStatus) ?? true) ? 'stopped' : 'requested';
  }

  /**
   * One chat completion (POST /chat/completions where the provider serves it). A POST, so it shares the
   * submissions' Retry-After hold: a 429 on it is the same gateway's limit. The answer's text, or what is
   * wrong with it (chat.ts); the caller decides what a bad answer does.
   */
  async chat(
    model: string,
    messages: ChatMessage[],
    options: CallOptions = {},
  ): Promise<ChatAnswer & { requestId?: string }> {
    if (!this.provider.chat)
      throw new BadRequestError(`not sent: ${this.provider.name} serves no chat completions`);
    const { json, requestId } = await this.call(this.provider.chat(model, messages), options);
    const answer = readChatAnswer(json);
    // Gateway text goes into the row's message and the kept rewrite: redacted like every other answer.
    const redacted =
      'problem' in answer
        ? { problem: this.redact(answer.problem) }
        : { ...answer, content: this.redact(answer.content) };
    return { ...redacted, ...(requestId ? { requestId } : {}) };
  }

  /** Whether listModels can ask the provider (not every dialect lists its models). */
  get canListModels(): boolean {
    return this.provider.models !== undefined;
  }

  async listModels(): Promise<string[]> {
    const models = this.provider.models;
    if (!models) throw new BadRequestError(`not sent: ${this.provider.name} lists no models`);
    const { json, requestId } = await this.call(models.call, {});
    const listed = models.read(json);
    if ('problem' in listed)
      throw new MalformedResponseError(this.redact(listed.problem), undefined, undefined, requestId);
    return listed;
  }

  /** Whether verifyKey can ask the provider (a provider that lists no models may have another call). */
  get canVerifyKey(): boolean {
    return this.provider.keyCheck !== undefined;
  }

  /**
   * The provider's cheap key check (keyCheck): resolves once it answered 2xx, else the call's error (a 401 or
   * 403 for a key the provider refuses). Makes no job.
   */
  async verifyKey(): Promise<void> {
    const check = this.provider.keyCheck;
    if (!check) throw new BadRequestError(`not sent: ${this.provider.name} has no key check`);
    await this.call(check, {});
  }

  /**
   * What fetching this provider's videos needs: for one that serves them itself, the key's headers, limited
   * to the base URL (read per call, so a rotated key is used). Undefined: videos are fetched without the key.
   */
  videoAuth(): VideoAuth | undefined {
    if (!this.provider.videoNeedsKey) return undefined;
    return { base: this.options.baseUrl, headers: this.provider.authorization(this.options.apiKey()) };
  }

  /** An answer read by the adapter; what it cannot read is a MalformedResponseError. */
  private read(read: (json: unknown) => ProviderJob | Problem, { json, requestId }: Answer): ProviderJob {
    const job = read(json);
    if ('problem' in job)
      throw new MalformedResponseError(this.redact(job.problem), undefined, undefined, requestId);
    return job;
  }

  private toJobState(job: ProviderJob, requestId: string | undefined): JobState {
    // The status goes into messages ("still <status> at its deadline"): gateway text, redacted and bounded.
    const rawStatus = this.redact(job.rawStatus).slice(0, MAX_STATUS_TEXT);
    const url = this.absolute(job.url);
    const { error } = job;
    return {
      id: job.id,
      status: job.status,
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

  /** A video URL as callers get it: a path resolved against the base URL; anything unusable dropped. */
  private absolute(url: string | undefined): string | undefined {
    if (!url) return undefined;
    const full = url.startsWith('/') ? `${this.options.baseUrl}${url}` : url;
    return URL.canParse(full) ? full : undefined;
  }

  /**
   * Where a call goes: a path under the base URL, or an absolute URL on its origin. Anything else is refused
   * before sending (the key goes with every call).
   */
  private urlOf(path: string, what: string): string {
    if (path.startsWith('/')) return `${this.options.baseUrl}${path}`;
    if (URL.canParse(path) && new URL(path).origin === new URL(this.options.baseUrl).origin) return path;
    throw new BadRequestError(`${what}: not sent: not on the gateway's origin`);
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
  private async call(http: HttpCall, options: CallOptions): Promise<Answer> {
    const { method, path } = http;
    const what = `${method} ${path}`;
    const url = this.urlOf(path, what);
    if (this.stopping) throw new WorkerStoppingError(what);
    this.checkKey(what, options.unblockedAt);
    const kind: CallKind = http.kind ?? (method === 'POST' ? 'submit' : 'status');
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
      return await sendCall({
        what,
        url,
        call: http,
        headers: this.provider.authorization(key),
        timeoutMs,
        readError: (json) => this.provider.readError(json),
        ...(this.provider.readRetryAfter ? { readRetryAfter: this.provider.readRetryAfter } : {}),
        redact: (text) => this.redact(text),
        ...(this.onPublishedRate ? { onPublishedRate: this.onPublishedRate } : {}),
      });
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
}
