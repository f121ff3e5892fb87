// fal's queue (https://queue.fal.run) as the simulator serves it, at /fal/... (base URL `<origin>/fal`), over
// the same keys, jobs, limits and faults as the Model Gateway. Written from:
// - Queue API: https://docs.fal.ai/model-endpoints/queue and
//   https://fal.ai/docs/documentation/model-apis/inference/queue (POST /{model_id} answers request_id,
//   response_url, status_url, cancel_url; IN_QUEUE with queue_position, IN_PROGRESS, COMPLETED; the status,
//   result and cancel URLs use the app (`owner/app`) only, never the model's sub-path)
// - Inference API: https://fal.ai/docs/api-reference/inference-api (`Authorization: Key <key>`; status answers
//   202 while queued or in progress, 200 when completed)
// - Cancel: https://fal.ai/docs/inference-api/queue/cancel (PUT .../cancel: CANCELLATION_REQUESTED,
//   ALREADY_COMPLETED, NOT_FOUND; a queued request is removed, a running one is signalled)
// - Errors: https://fal.ai/docs/documentation/model-apis/request-errors (`{ detail, error_type }` and
//   X-Fal-Error-Type) and fal's error reference (docs.fal.ai/errors: `{ detail: [{ loc, msg, type, ctx }] }`,
//   `content_policy_violation` and `one_of` as 422; read in its copy at henjicc/Henji-AI, docs/api/fal/base/)
// - Concurrency: https://docs.fal.ai/documentation/model-apis/concurrency-limits (queued requests are never
//   refused for concurrency: they wait in the queue)
// - fal-ai/fal-js, libs/client/src/queue.ts and types/common.ts (the status shapes, the app-prefix URLs)
// - github.com/TanStack/ai/pull/396 (checked against the live API: a failed request still ends COMPLETED, its
//   error comes from the result URL) and github.com/fal-ai/fal/pull/1143 (a COMPLETED status carries `error`
//   and `error_type` when the request failed)
// - The model page of fal-ai/wan-25-preview/text-to-video,
//   https://fal.ai/models/fal-ai/wan-25-preview/text-to-video/api
//   (input `resolution` "480p"/"720p"/"1080p", `duration` "5"/"10" as strings; output
//   `{ video: { url, content_type }, seed }`; read in its copy at henjicc/Henji-AI, docs/api/fal/wan/)
// Assumed, for want of a reference: the texts of 401/403/404 bodies, 400 `Request is still in progress` for a
// result asked too early, 499 `client_cancelled` for the result of a cancelled request, and that the queue
// accepts any JSON object, so an input the model rejects is a job that ends failed with a 422 result.
import { requireModel } from './api-keys';
import {
  endJob,
  jobOf,
  schemeSecret,
  type Dialect,
  type DialectRequest,
  type DialectResult,
} from './dialect-common';
import { HttpError, readJson } from './http';
import type { Job } from './jobs';
import { resultUrl } from './result-files';
import type { SimulatorState } from './state';
import { videoBytes } from './video-faults';

/** The video models this queue has, with the input values each takes. */
export const FAL_MODELS: Record<string, { resolutions: string[]; durations: string[] }> = {
  'fal-ai/wan-25-preview/text-to-video': { resolutions: ['480p', '720p', '1080p'], durations: ['5', '10'] },
};
const DEFAULTS = { resolution: '1080p', duration: '5' };

const NAMESPACES = new Set(['workflows', 'comfy']);

/** The app a model id's status and result URLs use: `owner/app`, with a namespace when it has one. */
export function falApp(model: string): string {
  const parts = model.split('/');
  return parts.slice(0, NAMESPACES.has(parts[0] ?? '') ? 3 : 2).join('/');
}

type FalPath =
  | { kind: 'submit'; model: string }
  | { kind: 'status' | 'result' | 'cancel'; app: string; id: string }
  | { kind: 'none' };

function parsePath(method: string | undefined, path: string): FalPath {
  const parts = path.split('/');
  const at = parts.indexOf('requests');
  if (at >= 2 && at <= 3 && parts.length - at <= 3 && parts[at + 1]) {
    const app = parts.slice(0, at).join('/');
    const id = parts[at + 1] ?? '';
    const tail = parts.slice(at + 2).join('/');
    if (method === 'GET' && tail === 'status') return { kind: 'status', app, id };
    if (method === 'GET' && tail === '') return { kind: 'result', app, id };
    if (method === 'PUT' && tail === 'cancel') return { kind: 'cancel', app, id };
    return { kind: 'none' };
  }
  if (method === 'POST' && parts.length >= 2 && parts.every(Boolean)) return { kind: 'submit', model: path };
  return { kind: 'none' };
}

const TEMPLATES: Record<FalPath['kind'], string> = {
  submit: 'POST /fal/{model}',
  status: 'GET /fal/{app}/requests/{id}/status',
  result: 'GET /fal/{app}/requests/{id}',
  cancel: 'PUT /fal/{app}/requests/{id}/cancel',
  none: '/fal/{other}',
};

/** A request's URLs, as the submit and every status answer carry them. */
function urls(origin: string, job: Job) {
  const base = `${origin}/fal/${falApp(job.model)}/requests/${encodeURIComponent(job.id)}`;
  return { response_url: base, status_url: `${base}/status`, cancel_url: `${base}/cancel` };
}

/** A problem with one input field, as fal's model errors word it (`type` from fal's error reference). */
interface InputIssue {
  field: string;
  type: 'dict_type' | 'missing' | 'one_of';
}

/** The values a field of the model takes, for a `one_of` issue. */
const expectedOf = (model: string, field: string): string[] =>
  (field === 'resolution' ? FAL_MODELS[model]?.resolutions : FAL_MODELS[model]?.durations) ?? [];

function issueMessage(model: string, { field, type }: InputIssue): string {
  if (type === 'one_of') {
    const quoted = expectedOf(model, field).map((v) => `'${v}'`);
    return `Input should be ${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
  }
  if (type === 'missing') return 'Field required';
  return 'Input should be a valid dictionary';
}

/** What the model makes of an input: the clip it asks for, or the first field it rejects. */
function readInput(
  model: string,
  raw: unknown,
): { prompt: string; resolution?: string; duration?: string; issue?: InputIssue } {
  const spec = FAL_MODELS[model];
  if (!spec || typeof raw !== 'object' || raw === null || Array.isArray(raw))
    return { prompt: '', issue: { field: 'body', type: 'dict_type' } };
  const { prompt, resolution, duration } = raw as Record<string, unknown>;
  const text = typeof prompt === 'string' ? prompt : '';
  if (!text.trim()) return { prompt: text, issue: { field: 'prompt', type: 'missing' } };
  if (resolution !== undefined && !spec.resolutions.includes(resolution as string))
    return { prompt: text, issue: { field: 'resolution', type: 'one_of' } };
  if (duration !== undefined && !spec.durations.includes(duration as string))
    return { prompt: text, issue: { field: 'duration', type: 'one_of' } };
  return {
    prompt: text,
    resolution: (resolution as string | undefined) ?? DEFAULTS.resolution,
    duration: (duration as string | undefined) ?? DEFAULTS.duration,
  };
}

/** POST /fal/{model}: queues a request (a new, billable job each time: fal takes no idempotency key). */
async function submit({ req, key, state, origin }: DialectRequest, model: string): Promise<DialectResult> {
  if (!FAL_MODELS[model]) throw new HttpError(404, 'not_found', `Application '${model}' not found`);
  requireModel(key, model, Object.keys(FAL_MODELS));
  const input = readInput(model, await readJson(req));
  // The queue never refuses for concurrency (the running-jobs cap): the request waits its turn.
  const job = state.createJob(key.id, {
    model,
    input: { prompt: input.prompt },
    parameters: {
      ...(input.resolution ? { resolution: input.resolution.toUpperCase() } : {}),
      ...(input.duration ? { duration: Number(input.duration) } : {}),
    },
  });
  if (input.issue) {
    // Kept in the job's code, so a restarted simulator still answers the same 422.
    const { type, field } = input.issue;
    job.outcome = {
      status: 'failed',
      code: `fal_input:${type}:${field}`,
      message: issueMessage(model, input.issue),
    };
    delete job.videoFault;
  }
  const body = { status: 'IN_QUEUE', request_id: job.id, ...urls(origin, job), queue_position: 0 };
  return { status: 200, body, job, created: true };
}

/** The request's status: IN_QUEUE, IN_PROGRESS, COMPLETED (with `error` when it failed). */
function status({ state, origin, query }: DialectRequest, job: Job): DialectResult {
  const raw = state.jobStatus(job);
  const finished = raw === 'completed' || raw === 'failed';
  let status = finished ? 'COMPLETED' : raw === 'queued' ? 'IN_QUEUE' : 'IN_PROGRESS';
  if (!finished && state.roll('unknownStatus')) status = 'WARMING_UP';
  const body: Record<string, unknown> = { status, request_id: job.id, ...urls(origin, job) };
  // The simulator's queue holds a request 2 s at most: nobody is ahead of it for long.
  if (status === 'IN_QUEUE') body.queue_position = 0;
  if (query.get('logs') === '1') body.logs = [];
  if (finished) body.metrics = { inference_time: (job.doneAt - job.startsAt) / 1000 };
  if (raw === 'failed' && job.outcome.status === 'failed') {
    body.error = job.outcome.message;
    body.error_type = failure(job).type;
  }
  return { status: finished ? 200 : 202, body, job };
}

/** A failed request's result: its HTTP status and body, by what made it fail. */
function failure(job: Job): { status: number; type: string; body: unknown } {
  const outcome = job.outcome.status === 'failed' ? job.outcome : { code: '', message: '' };
  const modelError = (field: string, type: string) => {
    const expected = type === 'one_of' ? { ctx: { expected: expectedOf(job.model, field) } } : {};
    const loc = field === 'body' ? ['body'] : ['body', field];
    const url = `https://docs.fal.ai/errors/#${type}`;
    return { status: 422, type, body: { detail: [{ loc, msg: outcome.message, type, url, ...expected }] } };
  };
  if (outcome.code.startsWith('fal_input:')) {
    const [, type = 'value_error', field = 'body'] = outcome.code.split(':');
    return modelError(field, type);
  }
  if (outcome.code === 'content_moderation') return modelError('prompt', 'content_policy_violation');
  if (outcome.code === 'cancelled')
    return {
      status: 499,
      type: 'client_cancelled',
      body: { detail: outcome.message, error_type: 'client_cancelled' },
    };
  return {
    status: 500,
    type: 'runner_server_error',
    body: { detail: outcome.message, error_type: 'runner_server_error' },
  };
}

/** GET the response_url: the model's output once completed, its error once failed. */
function result({ state, origin }: DialectRequest, job: Job): DialectResult {
  const raw = state.jobStatus(job);
  if (raw !== 'completed' && raw !== 'failed')
    throw new HttpError(400, 'in_progress', 'Request is still in progress');
  if (raw === 'failed') {
    const { status, type, body } = failure(job);
    return {
      status,
      body,
      job,
      headers: status >= 500 || status === 499 ? { 'x-fal-error-type': type } : {},
    };
  }
  if (job.badAnswer === 'no_url') return { status: 200, body: { seed: 42 }, job };
  const video = {
    url: resultUrl(state, origin, job, true),
    content_type: 'video/mp4',
    file_name: `${job.id}.mp4`,
    file_size: videoBytes(job).length,
  };
  return { status: 200, body: { video, seed: 42 }, job, carriesResult: true };
}

/**
 * PUT the cancel_url: a queued or running request stops at once (and stops billing), unless its app ignores the
 * cancel of a running request (the `cancelIgnored` fault): asked, answered, and it runs on and bills.
 */
function cancel(state: SimulatorState, job: Job | undefined): DialectResult {
  if (!job) return { status: 404, body: { status: 'NOT_FOUND' } };
  const now = state.now();
  if (job.startsAt <= now && now < job.doneAt && state.roll('cancelIgnored'))
    return { status: 202, body: { status: 'CANCELLATION_REQUESTED' }, job };
  if (!endJob(state, job, 'cancelled', 'Request was cancelled by the client'))
    return { status: 400, body: { status: 'ALREADY_COMPLETED' }, job };
  return { status: 202, body: { status: 'CANCELLATION_REQUESTED' }, job };
}

async function handle(request: DialectRequest): Promise<DialectResult> {
  const { req, path, state } = request;
  const target = parsePath(req.method, path);
  if (target.kind === 'none') throw new HttpError(404, 'not_found', 'Not Found');
  if (target.kind === 'submit') return submit(request, target.model);
  const job = jobOf(state, target.id, (model) => falApp(model) === target.app && model in FAL_MODELS);
  if (target.kind === 'cancel') return cancel(state, job);
  if (!job) throw new HttpError(404, 'not_found', 'Request not found');
  if (target.kind === 'status') job.checks = (job.checks ?? 0) + 1;
  // A job the queue forgot (jobs.ts `isGone`, job-faults.ts): fal has no other way to say it than 404.
  if (state.isGone(job) || job.badAnswer === 'gone' || job.badAnswer === 'status_unknown') {
    if (target.kind === 'status') state.stats.goneQueries += 1;
    throw new HttpError(404, 'not_found', 'Request not found');
  }
  if (job.badAnswer === 'error5xx') throw new HttpError(500, 'internal_error', 'Internal Server Error');
  return target.kind === 'status' ? status(request, job) : result(request, job);
}

export const falDialect: Dialect = {
  prefix: '/fal/',
  secret: (authorization) => schemeSecret('Key', authorization),
  route: (method, path) => {
    const kind = parsePath(method, path).kind;
    return kind === 'none' ? `${method} ${TEMPLATES.none}` : TEMPLATES[kind];
  },
  kind: (method, path) => {
    const kind = parsePath(method, path).kind;
    return kind === 'submit' ? 'submit' : kind === 'status' || kind === 'result' ? 'status' : 'other';
  },
  handle,
  errorAnswer: (e) => {
    if (e.status === 503)
      return {
        body: { detail: e.message, error_type: 'runner_scheduling_failure' },
        headers: { 'x-fal-error-type': 'runner_scheduling_failure' },
      };
    return { body: { detail: e.message } };
  },
};
