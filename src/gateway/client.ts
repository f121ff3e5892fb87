// The Model Gateway client (undici + zod). It makes exactly one HTTP call per method call: retry decisions
// belong to Temporal (activity retries and durable timers), so every outcome surfaces as a value or a typed
// error from errors.ts. Error text never carries the API key.
import { request, type Dispatcher } from 'undici';
import { z } from 'zod';
import type { GatewaySettings } from '../config';
import { DEFAULT_RETRY_AFTER_MS } from '../contract/failures';
import {
  ConnectionError,
  errorForStatus,
  GatewayError,
  MalformedResponseError,
  RateLimitError,
  TimeoutError,
} from './errors';
import { RequestPacer } from './pacer';
import { parseRetryAfter } from './retry-after';
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
}

const errorBody = z.object({
  error: z.object({ code: z.string().optional(), message: z.string().optional() }),
});
const jobBody = z.looseObject({
  id: z.string().min(1),
  status: z.string().min(1),
  data: z.array(z.looseObject({ url: z.string().min(1) })).optional(),
  error: z.looseObject({ code: z.string().optional(), message: z.string().optional() }).nullish(),
});
const modelsBody = z.looseObject({ data: z.array(z.looseObject({ id: z.string() })) });

export class GatewayClient {
  /** One pacer per client: the worker makes one client, shared by all its activities. */
  readonly pacer = new RequestPacer();

  constructor(private readonly options: GatewaySettings) {}

  /** How long one HTTP call may take (GATEWAY_TIMEOUT_MS). */
  get timeoutMs(): number {
    return this.options.timeoutMs;
  }

  /**
   * Submits one job. `idempotencyKey` must be the same on every retry of the same row. `maxWaitMs` bounds
   * the wait for the pacer (PacerBusyError beyond it).
   */
  async submit(body: GenerationRequest, idempotencyKey: string, maxWaitMs = Infinity): Promise<JobState> {
    const json = await this.call('POST', '/videos/generations', maxWaitMs, body, {
      'idempotency-key': idempotencyKey,
    });
    return this.toJobState(json);
  }

  async getJob(jobId: string, maxWaitMs = Infinity): Promise<JobState> {
    const path = `/videos/generations/${encodeURIComponent(jobId)}`;
    const json = await this.call('GET', path, maxWaitMs);
    return this.toJobState(json);
  }

  async listModels(): Promise<string[]> {
    const parsed = modelsBody.safeParse(await this.call('GET', '/models', Infinity));
    if (!parsed.success) throw new MalformedResponseError('GET /models returned an unexpected body');
    return parsed.data.data.map((m) => m.id);
  }

  private toJobState(json: unknown): JobState {
    const parsed = jobBody.safeParse(json);
    if (!parsed.success)
      throw new MalformedResponseError(
        `job response has an unexpected shape: ${parsed.error.issues[0]?.message}`,
      );
    const { id, status: rawStatus, data, error } = parsed.data;
    const status = canonicalStatus(rawStatus);
    const url = data?.[0]?.url;
    if (status === 'completed' && !url)
      throw new MalformedResponseError(`job ${id} is ${rawStatus} but has no data[0].url`);
    return {
      id,
      status,
      rawStatus,
      ...(url ? { url } : {}),
      ...(error
        ? { error: { code: error.code ?? 'unknown', message: this.redact(error.message ?? '') } }
        : {}),
    };
  }

  private redact(text: string): string {
    const key = this.options.apiKey();
    return key ? text.split(key).join('[redacted]') : text;
  }

  /** Every request goes through here: it waits for the pacer (submissions first), and tells it about 429s. */
  private async call(
    method: 'GET' | 'POST',
    path: string,
    maxWaitMs: number,
    body?: unknown,
    extraHeaders: Record<string, string> = {},
  ): Promise<unknown> {
    await this.pacer.acquire(method === 'POST' ? 'submit' : 'status', maxWaitMs);
    try {
      return await this.send(method, path, body, extraHeaders);
    } catch (err) {
      const error = err instanceof GatewayError ? err : new GatewayError(this.redact(String(err)));
      if (error instanceof RateLimitError)
        this.pacer.rateLimited(error.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS);
      throw error;
    }
  }

  private async send(
    method: string,
    path: string,
    body: unknown,
    extraHeaders: Record<string, string>,
  ): Promise<unknown> {
    const what = `${method} ${path}`;
    let response: Dispatcher.ResponseData;
    let text: string;
    try {
      response = await request(`${this.options.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.options.apiKey()}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...extraHeaders,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      text = await response.body.text();
    } catch (err) {
      const e = err as { name?: string; code?: string };
      if (
        e.name === 'TimeoutError' ||
        e.name === 'AbortError' ||
        e.code === 'UND_ERR_HEADERS_TIMEOUT' ||
        e.code === 'UND_ERR_BODY_TIMEOUT'
      ) {
        throw new TimeoutError(
          `${what}: no response within ${this.options.timeoutMs} ms (the request may have been processed)`,
        );
      }
      throw new ConnectionError(`${what}: connection failed (${e.code ?? e.name ?? 'unknown'})`);
    }
    const { statusCode } = response;
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      if (statusCode >= 200 && statusCode < 300)
        throw new MalformedResponseError(`${what}: response body is not JSON`, statusCode);
    }
    if (statusCode >= 200 && statusCode < 300) return json;

    const parsedError = errorBody.safeParse(json);
    const code = parsedError.success ? parsedError.data.error.code : undefined;
    const detail = this.redact(
      parsedError.success ? (parsedError.data.error.message ?? code ?? '') : text.slice(0, 200),
    );
    const message = `${what}: ${statusCode}${detail ? ` ${detail}` : ''}`;
    const header = response.headers['retry-after'];
    throw errorForStatus(
      statusCode,
      message,
      code,
      statusCode === 429 ? parseRetryAfter(Array.isArray(header) ? header[0] : header) : undefined,
    );
  }
}
