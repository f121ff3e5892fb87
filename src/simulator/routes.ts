// Request handling of the simulated gateway: /v1 (the spec's endpoints, with limits, hold and faults),
// /admin (the console's key management plus test controls, loopback only) and /files (result videos).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { parseRetryAfter } from '../gateway/retry-after';
import { videoBytes } from './video-faults';
import {
  CHAT_MODELS,
  RESOLUTIONS,
  VIDEO_MODELS,
  formatIssue,
  type AfterProcessingFault,
  type ApiKeyRecord,
  type FaultOptions,
  type Job,
  type RuntimeOptions,
  type SimulatorState,
} from './state';

/** What the request handler needs from the server around it. */
export interface RouteContext {
  state: SimulatorState;
  /** Scheme, host and port, for result URLs (known only once the server listens). */
  origin: () => string;
  recordRequests: boolean;
  /** Called after every request that may have changed keys or jobs (to persist them). */
  onChange: () => void;
  /** Refuses connections for `ms` (the listener is closed, so clients get ECONNREFUSED). */
  refuseConnections: (ms: number) => void;
}

const generationSchema = z.object({
  model: z.string(),
  input: z.looseObject({ prompt: z.string().min(1, 'must be a non-empty string') }),
  parameters: z
    .looseObject({
      resolution: z
        .string()
        .refine((r) => RESOLUTIONS.includes(r), `must be one of ${RESOLUTIONS.join(', ')}`)
        .optional(),
      duration: z.number().int('must be an integer').min(1).max(10).optional(),
    })
    .optional(),
});

const chatSchema = z.object({
  model: z.string(),
  messages: z.array(z.object({ role: z.string(), content: z.string() })).min(1),
});

const holdSchema = z.union([
  z.strictObject({ seconds: z.number().positive() }),
  z.strictObject({ until: z.union([z.number(), z.iso.datetime({ offset: true })]) }),
]);

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** What a processed /v1 request answers, and which job it concerns, to track what reached the client. */
interface V1Result {
  status: number;
  body: unknown;
  job?: Job;
  /** The request created (and billed) this job. */
  created?: boolean;
  /** The answer carries the job's URL. */
  carriesResult?: boolean;
}

type RouteKind = 'submit' | 'status' | 'other';

function isLoopback(req: IncomingMessage): boolean {
  const a = req.socket.remoteAddress ?? '';
  return a === '127.0.0.1' || a === '::1' || a === '::ffff:127.0.0.1';
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text) throw new HttpError(400, 'invalid_request', 'The request body is required.');
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 'invalid_json', 'The request body is not valid JSON.');
  }
}

function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  throw new HttpError(400, 'invalid_request', formatIssue(parsed.error));
}

/** Applies a runtime setter, turning its validation error into a 400. */
function settle<T>(apply: () => T): T {
  try {
    return apply();
  } catch (err) {
    throw new HttpError(400, 'invalid_request', (err as Error).message);
  }
}

const errorBody = (code: string, message: string) => ({ error: { code, message, type: 'error' } });

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
  text?: string,
) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(text ?? JSON.stringify(body));
}

/** Resolves true if the client went away (closed its connection) before `ms` passed, else false. */
function waitUnlessClosed(res: ServerResponse, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const onClose = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      res.off('close', onClose);
      resolve(res.destroyed);
    }, ms);
    res.once('close', onClose);
  });
}

export function createRequestHandler(ctx: RouteContext): (req: IncomingMessage, res: ServerResponse) => void {
  const { state } = ctx;

  const retryAfter = (waitMs: number): string => {
    const ms = Math.max(waitMs, state.faults.retryAfterMinSeconds * 1000);
    return state.options.retryAfterFormat === 'date'
      ? new Date(Math.ceil((state.now() + ms) / 1000) * 1000).toUTCString()
      : String(Math.max(1, Math.ceil(ms / 1000)));
  };

  const tooMany = (reason: string, code: string, message: string, waitMs: number) => {
    state.count429(reason);
    return new HttpError(429, code, message, { 'retry-after': retryAfter(waitMs) });
  };

  /** Every refusal is counted, so tests can tell how many requests a client sent with a refused key. */
  const authenticate = (req: IncomingMessage): ApiKeyRecord => {
    const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
    const secret = match?.[1];
    if (!secret) {
      state.stats.requestsWithoutKey += 1;
      throw new HttpError(401, 'unauthorized', 'unauthorized');
    }
    const record = state.findKey(secret);
    if (!record) {
      const deleted = state.deletedKey(secret);
      if (deleted) state.countRefused(deleted);
      else state.stats.requestsWithUnknownKey += 1;
      throw new HttpError(401, 'unauthorized', 'unauthorized');
    }
    if (!record.enabled) {
      state.countRefused(record);
      throw new HttpError(403, 'key_disabled', 'This API key is disabled.');
    }
    return record;
  };

  const requireModel = (key: ApiKeyRecord, model: string, known: string[]) => {
    if (!known.includes(model)) throw new HttpError(400, 'invalid_request', `model: unknown model ${model}`);
    if (key.models && !key.models.includes(model)) {
      throw new HttpError(403, 'model_access_denied', `This API key has no access to model ${model}.`);
    }
  };

  const jobView = (job: Job, forSubmit: boolean) => {
    let status = forSubmit ? 'queued' : state.jobStatus(job);
    if (!forSubmit && (status === 'queued' || status === 'running') && state.roll('unknownStatus')) {
      status = 'warming_up';
    }
    const view: Record<string, unknown> = {
      id: job.id,
      object: 'video.generation.job',
      status,
      model: job.model,
    };
    if (status === 'completed' && job.badAnswer === 'no_url') {
      view.data = []; // job-faults.ts: finished, paid, and no video to fetch
    } else if (status === 'completed') {
      const expires = state.options.urlTtlSeconds > 0 ? job.doneAt + state.options.urlTtlSeconds * 1000 : 0;
      view.data = [{ url: `${ctx.origin()}/files/${job.id}.mp4${expires ? `?expires=${expires}` : ''}` }];
    } else if (status === 'failed' && job.outcome.status === 'failed') {
      view.error = { code: job.outcome.code, message: job.outcome.message, type: 'error' };
    }
    return view;
  };

  const handleV1 = async (req: IncomingMessage, key: ApiKeyRecord, path: string): Promise<V1Result> => {
    if (req.method === 'POST' && path === '/v1/videos/generations') {
      const body = parseBody(generationSchema, await readJson(req));
      requireModel(key, body.model, VIDEO_MODELS);
      const idempotencyKey = req.headers['idempotency-key'] as string | undefined;
      const existing = state.idempotentJob(idempotencyKey);
      if (existing) return { status: 200, body: jobView(existing, false), job: existing };
      const wait = state.runningCapWait(key.id);
      if (wait > 0) {
        throw tooMany(
          'too_many_running_jobs',
          'too_many_running_jobs',
          'Too many jobs running for this key.',
          wait,
        );
      }
      const job = state.createJob(key.id, body, idempotencyKey);
      return { status: 200, body: jobView(job, true), job, created: true };
    }
    const jobMatch = /^\/v1\/videos\/generations\/([^/]+)$/.exec(path);
    if (req.method === 'GET' && jobMatch) {
      const job = state.jobs.get(decodeURIComponent(jobMatch[1] ?? ''));
      // Jobs belong to the account, not the key: a rotated key still sees earlier jobs.
      if (!job) throw new HttpError(404, 'not_found', `No job with id ${jobMatch[1]}.`);
      job.checks = (job.checks ?? 0) + 1;
      if (state.isGone(job)) {
        state.stats.goneQueries += 1;
        throw new HttpError(404, 'not_found', `No job with id ${jobMatch[1]}.`);
      }
      if (job.badAnswer === 'error5xx') throw new HttpError(500, 'internal_error', 'Internal error.');
      const view = jobView(job, false);
      return {
        status: 200,
        body: view,
        job,
        carriesResult: view.status === 'completed' && job.badAnswer === undefined,
      };
    }
    if (req.method === 'GET' && path === '/v1/models') {
      const models = [...VIDEO_MODELS, ...CHAT_MODELS].filter((m) => !key.models || key.models.includes(m));
      const data = models.map((id) => ({ id, object: 'model', owned_by: 'gateway' }));
      return { status: 200, body: { object: 'list', data } };
    }
    if (req.method === 'POST' && path === '/v1/chat/completions') {
      const body = parseBody(chatSchema, await readJson(req));
      requireModel(key, body.model, CHAT_MODELS);
      const last = body.messages[body.messages.length - 1]?.content ?? '';
      return {
        status: 200,
        body: {
          id: `chatcmpl-${state.stats.jobsCreated}-${Date.now()}`,
          object: 'chat.completion',
          created: Math.floor(state.now() / 1000),
          model: body.model,
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: `Simulated reply to: ${last}` },
              finish_reason: 'stop',
            },
          ],
          usage: { prompt_tokens: last.length, completion_tokens: 4, total_tokens: last.length + 4 },
        },
      };
    }
    throw new HttpError(404, 'not_found', `No route for ${req.method} ${path}.`);
  };

  /** Answers one admin request; `after` runs once the answer is out (for controls that cut connections). */
  const handleAdmin = async (
    req: IncomingMessage,
    path: string,
  ): Promise<{ status: number; body: unknown; after?: () => void }> => {
    if (!isLoopback(req)) throw new HttpError(403, 'forbidden', 'The admin API is only served on loopback.');
    const ok = (body: unknown, status = 200) => ({ status, body });
    const publicKey = (k: ApiKeyRecord) => ({
      id: k.id,
      description: k.description,
      enabled: k.enabled,
      models: k.models,
    });
    const route = `${req.method} ${path}`;
    if (route === 'POST /admin/keys') {
      const body = parseBody(
        z.object({ description: z.string().optional(), models: z.array(z.string()).optional() }),
        await readJson(req).catch(() => ({})),
      );
      const record = state.createKey(body.description ?? '', body.models);
      return ok({ ...publicKey(record), key: record.key }, 201);
    }
    if (route === 'GET /admin/keys') return ok({ data: [...state.keys.values()].map(publicKey) });
    if (route === 'GET /admin/stats') return ok(state.snapshot());
    if (route === 'GET /admin/faults') return ok(state.faults);
    if (route === 'POST /admin/faults') {
      const body = (await readJson(req)) as Partial<FaultOptions>;
      return ok(settle(() => state.setFaults(body)));
    }
    if (route === 'GET /admin/options') return ok(state.options);
    if (route === 'POST /admin/options') {
      const body = (await readJson(req)) as Partial<RuntimeOptions>;
      return ok(settle(() => state.setOptions(body)));
    }
    const holdView = () => ({
      holdUntil: state.holdUntil ? new Date(state.holdUntil).toISOString() : null,
      remainingMs: state.holdWait(),
    });
    if (route === 'GET /admin/hold') return ok(holdView());
    if (route === 'POST /admin/hold') {
      const body = parseBody(holdSchema, await readJson(req));
      const until =
        'seconds' in body
          ? state.now() + body.seconds * 1000
          : typeof body.until === 'number'
            ? body.until
            : Date.parse(body.until);
      state.setHold(until);
      return ok(holdView());
    }
    if (route === 'DELETE /admin/hold') {
      state.setHold(undefined);
      return ok(holdView());
    }
    if (route === 'POST /admin/outage') {
      const { seconds } = parseBody(z.strictObject({ seconds: z.number().positive() }), await readJson(req));
      return {
        status: 200,
        body: { refusingForMs: seconds * 1000 },
        after: () => ctx.refuseConnections(seconds * 1000),
      };
    }
    const jobMatch = /^\/admin\/jobs\/([^/]+)$/.exec(path);
    if (req.method === 'GET' && jobMatch) {
      const job = state.jobs.get(decodeURIComponent(jobMatch[1] ?? ''));
      if (!job) throw new HttpError(404, 'not_found', `No job with id ${jobMatch[1]}.`);
      return ok({
        id: job.id,
        keyId: job.keyId,
        status: state.jobStatus(job),
        gone: state.isGone(job),
        idempotencyKey: job.idempotencyKey ?? null,
        checks: job.checks ?? 0,
        idDelivered: job.idDelivered ?? null,
        resultDelivered: job.resultDelivered ?? null,
        createdAt: new Date(job.createdAt).toISOString(),
        doneAt: new Date(job.doneAt).toISOString(),
      });
    }
    const keyMatch = /^\/admin\/keys\/([^/]+)(?:\/(enable|disable))?$/.exec(path);
    const record = keyMatch ? state.keys.get(keyMatch[1] ?? '') : undefined;
    if (keyMatch && !record) throw new HttpError(404, 'not_found', `No key with id ${keyMatch[1]}.`);
    if (record && req.method === 'POST' && keyMatch?.[2]) {
      record.enabled = keyMatch[2] === 'enable';
      return ok(publicKey(record));
    }
    if (record && req.method === 'DELETE' && !keyMatch?.[2]) {
      state.keys.delete(record.id);
      return ok({ id: record.id, deleted: true });
    }
    throw new HttpError(404, 'not_found', `No route for ${req.method} ${path}.`);
  };

  const serveFile = (res: ServerResponse, path: string, query: URLSearchParams) => {
    const job = state.jobs.get(decodeURIComponent(path.slice('/files/'.length).replace(/\.mp4$/, '')));
    const expires = Number(query.get('expires') ?? 0);
    if (!job || state.jobStatus(job) !== 'completed') throw new HttpError(404, 'not_found', 'No such file.');
    if (expires && state.now() > expires) throw new HttpError(410, 'expired', 'This link has expired.');
    const bytes = videoBytes(job);
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': bytes.length });
    res.end(bytes);
    return 200;
  };

  /**
   * Sends a processed /v1 answer through the after-processing faults. Returns the status the client saw
   * (0 = none). On a submit that created a job, a lost answer is counted as an ambiguous submit.
   */
  const answerV1 = async (
    req: IncomingMessage,
    res: ServerResponse,
    result: V1Result,
    faulty: boolean,
  ): Promise<number> => {
    const lost = (fault: AfterProcessingFault) => {
      if (result.created) state.countAmbiguousSubmit(fault);
    };
    if (faulty && state.roll('drop')) {
      lost('drop');
      req.socket.destroy();
      return 0;
    }
    for (const [fault, status] of [
      ['error502After', 502],
      ['error504After', 504],
    ] as const) {
      if (faulty && state.roll(fault)) {
        lost(fault);
        const message = status === 502 ? 'Bad gateway.' : 'Gateway timeout.';
        send(res, status, errorBody(status === 502 ? 'bad_gateway' : 'gateway_timeout', message));
        return status;
      }
    }
    if (faulty && state.roll('slow') && (await waitUnlessClosed(res, state.faults.slowMs))) {
      lost('slow'); // the client gave up before the late answer
      return 0;
    }
    if (faulty && state.roll('malformed')) {
      lost('malformed');
      send(res, result.status, undefined, {}, '{"id": "vid_');
      return result.status;
    }
    const { job } = result;
    if (job) {
      // Counted only once the answer is out: what the client could not read, it does not know.
      res.once('finish', () => {
        job.idDelivered = true;
        if (result.carriesResult) job.resultDelivered = true;
      });
    }
    send(res, result.status, result.body);
    return result.status;
  };

  const routeKind = (method: string | undefined, path: string): RouteKind =>
    method === 'POST' && path === '/v1/videos/generations'
      ? 'submit'
      : method === 'GET' && /^\/v1\/videos\/generations\/[^/]+$/.test(path)
        ? 'status'
        : 'other';

  /** Handles one /v1 request: key, hold, rate limit, faults before processing, processing, answer. */
  const serveV1 = async (req: IncomingMessage, res: ServerResponse, path: string): Promise<number> => {
    const key = authenticate(req);
    const held = state.holdWait();
    if (held > 0) throw tooMany('held', 'rate_limited', 'Quota exhausted; retry later.', held);
    const wait = state.takeToken(key.id);
    if (wait > 0) throw tooMany('rate_limited', 'rate_limited', 'Rate limit exceeded.', wait);
    const { scope } = state.faults;
    const faulty = scope === 'all' || scope === routeKind(req.method, path);
    if (faulty && state.roll('error429')) {
      throw tooMany('injected', 'rate_limited', 'Rate limit exceeded.', 1000);
    }
    if (faulty && state.roll('error5xx'))
      throw new HttpError(503, 'unavailable', 'The service is temporarily unavailable.');
    if (faulty && state.roll('resetBefore')) {
      req.socket.destroy();
      return 0;
    }
    return answerV1(req, res, await handleV1(req, key, path), faulty);
  };

  return (req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname;
    const route = `${req.method} ${path
      .replace(/^\/v1\/videos\/generations\/[^/]+$/, '/v1/videos/generations/{id}')
      .replace(/^\/admin\/keys\/[^/]+/, '/admin/keys/{id}')
      .replace(/^\/admin\/jobs\/[^/]+$/, '/admin/jobs/{id}')}`;
    const isV1 = path.startsWith('/v1/');
    void (async () => {
      let status = 500;
      try {
        if (path.startsWith('/files/')) {
          status = serveFile(res, path, url.searchParams);
        } else if (path.startsWith('/admin/')) {
          const answer = await handleAdmin(req, path);
          status = answer.status;
          if (answer.after) res.once('finish', answer.after);
          send(res, answer.status, answer.body);
        } else if (isV1) {
          status = await serveV1(req, res, path);
        } else {
          throw new HttpError(404, 'not_found', `No route for ${req.method} ${path}.`);
        }
      } catch (err) {
        const e = err instanceof HttpError ? err : new HttpError(500, 'internal_error', 'Internal error.');
        status = e.status;
        if (!res.headersSent) send(res, status, errorBody(e.code, e.message), e.headers);
      } finally {
        state.countRequest(route, status);
        if (ctx.recordRequests && isV1) {
          const wait =
            status === 429
              ? parseRetryAfter(String(res.getHeader('retry-after') ?? ''), state.now())
              : undefined;
          state.requestLog.push({
            at: state.now(),
            route,
            status,
            ...(wait !== undefined ? { retryAfterMs: wait } : {}),
          });
        }
        // Status checks change counters only; those are saved at close, not rewritten per poll.
        if (req.method !== 'GET') ctx.onChange();
      }
    })();
  };
}
