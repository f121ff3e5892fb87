// The OpenAI Videos dialect as the simulator serves it, at /openai/v1/... (base URL `<origin>/openai/v1`), over
// the same keys, jobs, limits and faults as the Model Gateway (dialect-server.ts runs it). Written from the
// OpenAI API reference for Videos (https://platform.openai.com/docs/api-reference/videos) and its mirror in
// Azure AI Foundry's reference, as LiteLLM's proxy serves it (https://docs.litellm.ai/docs/videos):
// - POST /videos: `{ model, prompt, seconds, size }`; `seconds` one of "4", "8", "12" (default "4"), `size` one
//   of 720x1280, 1280x720 (default 720x1280) and, for sora-2-pro, 1024x1792, 1792x1024. No idempotency key.
// - GET /videos/{id}: the video object (`queued`, `in_progress`, `completed`, `failed` with `error`).
// - GET /videos/{id}/content: the video, with the key. Here always a 302 to the job's result URL on this
//   simulator (/files/..., with the expiry and CDN redirects the faults ask for), signed afresh once the last
//   signing expired: the result path is outside the base URL, so a client that sends the key there is seen
//   (`keysAtResults`).
// - DELETE /videos/{id}: `{ id, object: "video.deleted", deleted: true }`; an unfinished job stops there.
// - GET /models, POST /chat/completions as the Model Gateway's.
// Assumed: the error texts and codes (OpenAI's `{ error: { message, type, param, code } }` shape), 404 for the
// content of a video that is not completed, and 404 for a deleted video.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { requireModel } from './api-keys';
import { chatRoute } from './chat-route';
import { endJob, jobOf, schemeSecret, type Dialect, type DialectResult } from './dialect-common';
import { HttpError, parseBody, readJson } from './http';
import type { Job } from './jobs';
import { CHAT_MODELS } from './models-route';
import { resultUrl } from './result-files';
import type { SimulatorState } from './state';

export const OPENAI_VIDEO_MODELS = ['sora-2', 'sora-2-pro'];
const SECONDS = ['4', '8', '12'];
const SIZES = ['720x1280', '1280x720'];
const PRO_SIZES = [...SIZES, '1024x1792', '1792x1024'];

const createSchema = z.looseObject({
  model: z.string().default('sora-2'),
  prompt: z.string().min(1, 'must be a non-empty string'),
  seconds: z.enum(SECONDS).default('4'),
  size: z.string().default('720x1280'),
});

/** What this dialect keeps beside the shared jobs: sizes asked (the video object shows them), deletions. */
interface DialectState {
  sizes: Map<string, string>;
  deleted: Set<string>;
  /** Requests for result files (/files, /cdn) that carried an Authorization header: a key sent off its API. */
  keysAtResults: number;
}
const states = new WeakMap<SimulatorState, DialectState>();
function own(state: SimulatorState): DialectState {
  let s = states.get(state);
  if (!s) states.set(state, (s = { sizes: new Map(), deleted: new Set(), keysAtResults: 0 }));
  return s;
}

/** How many requests for result files carried an Authorization header (each is a key sent off its API). */
export const keysAtResults = (state: SimulatorState): number => own(state).keysAtResults;

/** Counts a request for a result file that carries an Authorization header (routes.ts). */
export function noteKeyAtResult(state: SimulatorState, req: IncomingMessage): void {
  if (req.headers.authorization) own(state).keysAtResults += 1;
}

type Parsed = { kind: 'submit' | 'status' | 'content' | 'delete' | 'models' | 'chat' | 'none'; id?: string };

function parse(method: string | undefined, path: string): Parsed {
  if (path === 'v1/videos') return { kind: method === 'POST' ? 'submit' : 'none' };
  if (path === 'v1/models' && method === 'GET') return { kind: 'models' };
  if (path === 'v1/chat/completions' && method === 'POST') return { kind: 'chat' };
  const m = /^v1\/videos\/([^/]+)(\/content)?$/.exec(path);
  if (!m) return { kind: 'none' };
  if (m[2]) return { kind: method === 'GET' ? 'content' : 'none', id: m[1] };
  return { kind: method === 'GET' ? 'status' : method === 'DELETE' ? 'delete' : 'none', id: m[1] };
}

const STATUS: Record<string, string> = { queued: 'queued', running: 'in_progress' };

/** The video object: on submit always `queued`; later its status, progress and error. */
function videoView(state: SimulatorState, job: Job, forSubmit: boolean) {
  let status = forSubmit ? 'queued' : state.jobStatus(job);
  status = STATUS[status] ?? status;
  if (!forSubmit && job.badAnswer === 'status_unknown') status = 'UNKNOWN'; // job-faults.ts: forgotten
  if (!forSubmit && (status === 'queued' || status === 'in_progress') && state.roll('unknownStatus'))
    status = 'warming_up';
  const span = Math.max(1, job.doneAt - job.startsAt);
  const done = Math.min(99, Math.max(0, Math.round(((state.now() - job.startsAt) / span) * 100)));
  return {
    id: job.id,
    object: 'video',
    model: job.model,
    status,
    progress: status === 'in_progress' ? done : status === 'completed' ? 100 : 0,
    created_at: Math.floor(job.createdAt / 1000),
    ...(status === 'completed' ? { completed_at: Math.floor(job.doneAt / 1000) } : {}),
    seconds: String(job.duration ?? 4),
    size: own(state).sizes.get(job.id) ?? '720x1280',
    error:
      status === 'failed' && job.outcome.status === 'failed'
        ? { code: job.outcome.code, message: job.outcome.message }
        : null,
  };
}

const owns = (model: string) => OPENAI_VIDEO_MODELS.includes(model);

/**
 * Where GET /content sends the client: the job's signed URL, signed afresh once the last one expired, whether
 * or not status checks re-sign (`freshUrlOnCheck`). The API serves the video itself: its content URL works as
 * long as the video is kept, so a client that comes back late to it gets the video, not a dead link.
 */
function contentLocation(state: SimulatorState, origin: string, job: Job): string {
  const current = resultUrl(state, origin, job);
  const expires = Number(new URL(current).searchParams.get('expires') ?? 0);
  if (!expires || state.now() <= expires) return current;
  // A new token, as result-files.ts signs a fresh URL: the expired one stays dead.
  job.urlToken = `t${randomBytes(8).toString('hex')}`;
  job.urlIssuedAt = state.now();
  state.stats.freshUrlsIssued += 1;
  return resultUrl(state, origin, job);
}

function jobNamed(state: SimulatorState, id: string | undefined): Job {
  const job = id === undefined ? undefined : jobOf(state, id, owns);
  if (!job || own(state).deleted.has(job.id) || state.isGone(job) || job.badAnswer === 'gone') {
    if (job && state.isGone(job)) state.stats.goneQueries += 1;
    throw new HttpError(404, 'not_found', `No video with id ${id}.`);
  }
  return job;
}

export const openAiVideosDialect: Dialect = {
  prefix: '/openai/',
  secret: (authorization) => schemeSecret('Bearer', authorization),
  route(method, path) {
    const { kind } = parse(method, path);
    const shown = path.replace(/^v1\/videos\/[^/]+/, 'v1/videos/{id}');
    return `${method} /openai/${kind === 'none' ? path : shown}`;
  },
  kind(method, path) {
    const { kind } = parse(method, path);
    return kind === 'submit' || kind === 'status' ? kind : 'other';
  },
  async handle({ req, path, key, state, origin }): Promise<DialectResult> {
    const { kind, id } = parse(req.method, path);
    if (kind === 'submit') {
      const body = parseBody(createSchema, await readJson(req));
      requireModel(key, body.model, OPENAI_VIDEO_MODELS);
      const sizes = body.model === 'sora-2-pro' ? PRO_SIZES : SIZES;
      if (!sizes.includes(body.size))
        throw new HttpError(400, 'invalid_value', `size: must be one of ${sizes.join(', ')}`);
      const [width, height] = body.size.split('x').map(Number) as [number, number];
      const job = state.createJob(key.id, {
        model: body.model,
        input: { prompt: body.prompt },
        parameters: { resolution: `${Math.min(width, height)}P`, duration: Number(body.seconds) },
      });
      own(state).sizes.set(job.id, body.size);
      return { status: 200, body: videoView(state, job, true), job, created: true };
    }
    if (kind === 'status') {
      const job = jobNamed(state, id);
      job.checks = (job.checks ?? 0) + 1;
      if (job.badAnswer === 'error5xx') throw new HttpError(500, 'internal_error', 'Internal error.');
      const view = videoView(state, job, false);
      return { status: 200, body: view, job, carriesResult: view.status === 'completed' };
    }
    if (kind === 'content') {
      const job = jobNamed(state, id);
      if (state.jobStatus(job) !== 'completed' || job.badAnswer === 'no_url')
        throw new HttpError(404, 'video_not_ready', `Video ${job.id} has no content.`);
      const location = contentLocation(state, origin, job);
      return { status: 302, body: undefined, headers: { location }, job, carriesResult: true };
    }
    if (kind === 'delete') {
      const job = jobNamed(state, id);
      endJob(state, job, 'cancelled', 'The video was deleted before it finished.');
      own(state).deleted.add(job.id);
      return { status: 200, body: { id: job.id, object: 'video.deleted', deleted: true } };
    }
    if (kind === 'models') {
      const models = [...OPENAI_VIDEO_MODELS, ...CHAT_MODELS].filter(
        (m) => !key.models || key.models.includes(m),
      );
      return {
        status: 200,
        body: { object: 'list', data: models.map((m) => ({ id: m, object: 'model', owned_by: 'openai' })) },
      };
    }
    if (kind === 'chat') {
      const chat = await chatRoute(req, '/v1/chat/completions', key, state);
      if (chat) return chat;
    }
    throw new HttpError(404, 'not_found', `No route for ${req.method} /openai/${path}.`);
  },
  errorAnswer: (error) => ({
    body: {
      error: {
        message: error.message,
        type: error.status === 429 ? 'rate_limit_error' : 'invalid_request_error',
        param: null,
        code: error.code,
      },
    },
  }),
};
