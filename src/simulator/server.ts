// A faithful HTTP simulator of the Model Gateway (shared/seed spec), with the console's key management as an
// admin API, per-key limits and seedable fault injection. Tests, benchmarks and demos talk to it over real HTTP.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { parseRetryAfter } from '../gateway/retry-after';
import { tinyMp4 } from './mp4';
import {
  CHAT_MODELS,
  RESOLUTIONS,
  SimulatorState,
  VIDEO_MODELS,
  type ApiKeyRecord,
  type FaultOptions,
  type Job,
  type SimulatorOptions,
  type StateData,
} from './state';

export type { SimulatorOptions, FaultOptions } from './state';

export interface Simulator {
  /** Base URL ending in /v1, as clients configure it. */
  baseUrl: string;
  origin: string;
  /** The key registered at start (the first of `apiKeys`, or a fresh one). */
  apiKey: string;
  state: SimulatorState;
  stats(): ReturnType<SimulatorState['snapshot']>;
  setFaults(faults: Partial<FaultOptions>): void;
  close(): Promise<void>;
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
  const first = parsed.error.issues[0];
  const path = first?.path.join('.') || 'body';
  throw new HttpError(400, 'invalid_request', `${path}: ${first?.message ?? 'invalid'}`);
}

export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const state = new SimulatorState({
    jobSeconds: options.jobSeconds ?? 20,
    jobJitterSeconds: options.jobJitterSeconds ?? 0,
    rateLimit: options.rateLimit ?? 0,
    burst: options.burst ?? 0,
    maxRunningJobs: options.maxRunningJobs ?? 0,
    retryAfterFormat: options.retryAfterFormat ?? 'seconds',
    urlTtlSeconds: options.urlTtlSeconds ?? 0,
    idempotency: options.idempotency ?? true,
    faults: options.faults,
    seed: options.seed ?? 1,
    now: options.now,
  });
  if (options.stateFile && existsSync(options.stateFile)) {
    state.restore(JSON.parse(readFileSync(options.stateFile, 'utf8')) as StateData);
  }
  const save = () => {
    clearTimeout(saveTimer);
    saveTimer = undefined;
    if (options.stateFile) writeFileSync(options.stateFile, JSON.stringify(state.persistable()));
  };
  // At most one write per 500 ms: rewriting the whole file per request would be quadratic in a big batch.
  let saveTimer: NodeJS.Timeout | undefined;
  const scheduleSave = () => {
    saveTimer ??= setTimeout(save, 500);
  };
  const initialKeys = options.apiKeys?.length ? options.apiKeys : [undefined];
  const registered = initialKeys.map(
    (key, i) =>
      (key ? state.findKey(key) : undefined) ?? state.createKey(`initial key ${i + 1}`, undefined, key),
  );
  let origin = '';

  const retryAfter = (waitMs: number): string => {
    const seconds = Math.max(1, Math.ceil(waitMs / 1000));
    return state.options.retryAfterFormat === 'date'
      ? new Date(Math.ceil((state.now() + waitMs) / 1000) * 1000).toUTCString()
      : String(seconds);
  };

  const authenticate = (req: IncomingMessage): ApiKeyRecord => {
    const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
    const record = match?.[1] ? state.findKey(match[1]) : undefined;
    if (!record) throw new HttpError(401, 'unauthorized', 'unauthorized');
    if (!record.enabled) throw new HttpError(403, 'key_disabled', 'This API key is disabled.');
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
    if (status === 'completed') {
      const expires = state.options.urlTtlSeconds > 0 ? job.doneAt + state.options.urlTtlSeconds * 1000 : 0;
      view.data = [{ url: `${origin}/files/${job.id}.mp4${expires ? `?expires=${expires}` : ''}` }];
    } else if (status === 'failed' && job.outcome.status === 'failed') {
      view.error = { code: job.outcome.code, message: job.outcome.message, type: 'error' };
    }
    return view;
  };

  /** Handles one authenticated /v1 request; returns [status, body]. */
  const handleV1 = async (
    req: IncomingMessage,
    key: ApiKeyRecord,
    path: string,
  ): Promise<[number, unknown]> => {
    if (req.method === 'POST' && path === '/v1/videos/generations') {
      const body = parseBody(generationSchema, await readJson(req));
      requireModel(key, body.model, VIDEO_MODELS);
      const idempotencyKey = req.headers['idempotency-key'] as string | undefined;
      const existing = state.idempotentJob(idempotencyKey);
      if (existing) return [200, jobView(existing, false)];
      const wait = state.runningCapWait(key.id);
      if (wait > 0) {
        throw new HttpError(429, 'too_many_running_jobs', 'Too many jobs running for this key.', {
          'retry-after': retryAfter(wait),
        });
      }
      return [200, jobView(state.createJob(key.id, body, idempotencyKey), true)];
    }
    const jobMatch = /^\/v1\/videos\/generations\/([^/]+)$/.exec(path);
    if (req.method === 'GET' && jobMatch) {
      const job = state.jobs.get(decodeURIComponent(jobMatch[1] ?? ''));
      // Jobs belong to the account, not the key: a rotated key still sees earlier jobs.
      if (!job) throw new HttpError(404, 'not_found', `No job with id ${jobMatch[1]}.`);
      return [200, jobView(job, false)];
    }
    if (req.method === 'GET' && path === '/v1/models') {
      const models = [...VIDEO_MODELS, ...CHAT_MODELS].filter((m) => !key.models || key.models.includes(m));
      return [
        200,
        { object: 'list', data: models.map((id) => ({ id, object: 'model', owned_by: 'gateway' })) },
      ];
    }
    if (req.method === 'POST' && path === '/v1/chat/completions') {
      const body = parseBody(chatSchema, await readJson(req));
      requireModel(key, body.model, CHAT_MODELS);
      const last = body.messages[body.messages.length - 1]?.content ?? '';
      return [
        200,
        {
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
      ];
    }
    throw new HttpError(404, 'not_found', `No route for ${req.method} ${path}.`);
  };

  const handleAdmin = async (req: IncomingMessage, path: string): Promise<[number, unknown]> => {
    if (!isLoopback(req)) throw new HttpError(403, 'forbidden', 'The admin API is only served on loopback.');
    const publicKey = (k: ApiKeyRecord) => ({
      id: k.id,
      description: k.description,
      enabled: k.enabled,
      models: k.models,
    });
    if (req.method === 'POST' && path === '/admin/keys') {
      const body = parseBody(
        z.object({ description: z.string().optional(), models: z.array(z.string()).optional() }),
        await readJson(req).catch(() => ({})),
      );
      const record = state.createKey(body.description ?? '', body.models);
      return [201, { ...publicKey(record), key: record.key }];
    }
    if (req.method === 'GET' && path === '/admin/keys')
      return [200, { data: [...state.keys.values()].map(publicKey) }];
    if (req.method === 'GET' && path === '/admin/stats') return [200, state.snapshot()];
    if (req.method === 'POST' && path === '/admin/faults') {
      Object.assign(state.faults, (await readJson(req)) as Partial<FaultOptions>);
      return [200, state.faults];
    }
    const keyMatch = /^\/admin\/keys\/([^/]+)(?:\/(enable|disable))?$/.exec(path);
    const record = keyMatch ? state.keys.get(keyMatch[1] ?? '') : undefined;
    if (keyMatch && !record) throw new HttpError(404, 'not_found', `No key with id ${keyMatch[1]}.`);
    if (record && req.method === 'POST' && keyMatch?.[2]) {
      record.enabled = keyMatch[2] === 'enable';
      return [200, publicKey(record)];
    }
    if (record && req.method === 'DELETE' && !keyMatch?.[2]) {
      state.keys.delete(record.id);
      return [200, { id: record.id, deleted: true }];
    }
    throw new HttpError(404, 'not_found', `No route for ${req.method} ${path}.`);
  };

  const serveFile = (res: ServerResponse, path: string, query: URLSearchParams) => {
    const job = state.jobs.get(decodeURIComponent(path.slice('/files/'.length).replace(/\.mp4$/, '')));
    const expires = Number(query.get('expires') ?? 0);
    if (!job || state.jobStatus(job) !== 'completed') throw new HttpError(404, 'not_found', 'No such file.');
    if (expires && state.now() > expires) throw new HttpError(410, 'expired', 'This link has expired.');
    const bytes = tinyMp4(job.id);
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': bytes.length });
    res.end(bytes);
    return 200;
  };

  const send = (
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
    text?: string,
  ) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(text ?? JSON.stringify(body));
  };

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname;
    const route = `${req.method} ${path.replace(/^\/v1\/videos\/generations\/[^/]+$/, '/v1/videos/generations/{id}').replace(/^\/admin\/keys\/[^/]+/, '/admin/keys/{id}')}`;
    const isV1 = path.startsWith('/v1/');
    void (async () => {
      let status = 500;
      try {
        if (path.startsWith('/files/')) {
          status = serveFile(res, path, url.searchParams);
          return;
        }
        if (path.startsWith('/admin/')) {
          const [s, body] = await handleAdmin(req, path);
          status = s;
          send(res, s, body);
          return;
        }
        if (!isV1) throw new HttpError(404, 'not_found', `No route for ${req.method} ${path}.`);
        const key = authenticate(req);
        const wait = state.takeToken(key.id);
        if (wait > 0)
          throw new HttpError(429, 'rate_limited', 'Rate limit exceeded.', {
            'retry-after': retryAfter(wait),
          });
        if (state.roll('error5xx'))
          throw new HttpError(503, 'unavailable', 'The service is temporarily unavailable.');
        const [s, body] = await handleV1(req, key, path);
        status = s;
        // Faults below hit after the request was processed: the client cannot know whether it took effect.
        if (state.roll('drop')) {
          status = 0;
          req.socket.destroy();
          return;
        }
        if (state.roll('slow')) await new Promise((r) => setTimeout(r, state.faults.slowMs));
        if (state.roll('malformed')) return send(res, s, undefined, {}, '{"id": "vid_');
        send(res, s, body);
      } catch (err) {
        const e = err instanceof HttpError ? err : new HttpError(500, 'internal_error', 'Internal error.');
        status = e.status;
        if (status === 429) state.stats.rateLimited += 1;
        if (!res.headersSent)
          send(res, status, { error: { code: e.code, message: e.message, type: 'error' } }, e.headers);
      } finally {
        state.countRequest(route, status);
        if (options.recordRequests && isV1) {
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
        if (req.method !== 'GET' && options.stateFile) scheduleSave();
      }
    })();
  });

  await new Promise<void>((resolve) =>
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve),
  );
  const { port } = server.address() as AddressInfo;
  origin = `http://${options.host ?? '127.0.0.1'}:${port}`;
  return {
    baseUrl: `${origin}/v1`,
    origin,
    apiKey: registered[0]!.key,
    state,
    stats: () => state.snapshot(),
    setFaults: (faults) => Object.assign(state.faults, faults),
    close: () =>
      new Promise((resolve) => {
        save();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
