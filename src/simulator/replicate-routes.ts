// Replicate's predictions (https://api.replicate.com/v1) as the simulator serves them, at /replicate/v1/...
// (base URL `<origin>/replicate/v1`), over the same keys, jobs, limits and faults as the Model Gateway.
// Written from:
// - HTTP API: https://sdks.replicate.com/typescript/resources/predictions
//   (POST /v1/models/{owner}/{name}/predictions with `{ input }` and `Prefer: wait[=n]`, up to 60 s;
//   POST /v1/predictions with `version`; GET /v1/predictions/{id}; POST /v1/predictions/{id}/cancel; the
//   prediction object: id, model, version, input, output, error, logs, status, data_removed, urls.get/cancel)
// - https://replicate.com/docs/topics/predictions/create-a-prediction (sync and async modes)
// - https://replicate.com/docs/topics/predictions/lifecycle and the changelog entry
//   https://replicate.com/changelog/2025-10-16-prediction-deadlines (starting, processing, succeeded, failed,
//   canceled, aborted; `Cancel-After: 1m`: aborted, not billed, before it starts; canceled after)
// - https://replicate.com/docs/topics/predictions/data-retention and .../output-files (API predictions' input,
//   output and files are removed after an hour; files on replicate.delivery)
// - https://replicate.com/docs/topics/predictions/rate-limits (600 creates a minute; 429 with
//   `{"detail":"Request was throttled. Your rate limit resets in ~30s."}`; stronger limits near zero credit)
// - replicate/replicate-javascript, index.d.ts and lib/ (statuses, `urls`, Bearer auth, Retry-After read on 429)
// - GET /v1/account (https://sdks.replicate.com/typescript/resources/account): the token's account, `{ type,
//   username, name, github_url }`; a wrong token gets the 401 every route gets
// - An error answer as the API sends it (`{ detail, status, title, invalid_fields }` for 422 "Input validation
//   failed"), quoted in Lazyjimpressions/ourvidz RV51_GENERATION_FAILURE_ANALYSIS.md
// - For bytedance/seedance-1-lite: ByteDance's Seedance 1.0 Lite reference as mirrored at
//   https://docs.modellix.ai/bytedance/seedance-1-0-lite-t2v (`duration` 2-12 whole seconds, `resolution`
//   "480p"/"720p"/"1080p") and Replicate's seedance pages (https://replicate.com/bytedance/seedance-2.0: output
//   one URI)
// Assumed: that Replicate's seedance-1-lite takes ByteDance's ranges; the texts of 401/403/404/400 bodies; that
// unknown input fields are ignored; that a cancel of a finished prediction answers it unchanged; Retry-After is
// sent on every 429 (the reference only words the wait in `detail`), so the simulator's rate-limit faults read
// the same in every dialect.
import { parseRetryAfter } from '../gateway/retry-after';
import { requireModel } from './api-keys';
import {
  endJob,
  iso,
  jobOf,
  schemeSecret,
  type Dialect,
  type DialectRequest,
  type DialectResult,
} from './dialect-common';
import { HttpError, readJson, waitUnlessClosed } from './http';
import type { Job } from './jobs';
import { tooMany } from './rate-limits';
import { resultUrl } from './result-files';
import type { SimulatorState } from './state';

/** The video models, with the values each takes (null: no such field; its fixed clip is served). */
export const REPLICATE_MODELS: Record<
  string,
  {
    resolutions: string[] | null;
    durations: [number, number] | null;
    fixed: { resolution: string; duration: number };
  }
> = {
  'bytedance/seedance-1-lite': {
    resolutions: ['480p', '720p', '1080p'],
    durations: [2, 12],
    fixed: { resolution: '720p', duration: 5 },
  },
  'minimax/video-01': { resolutions: null, durations: null, fixed: { resolution: '720p', duration: 6 } },
};

/** The longest `Prefer: wait`, and its default. */
const MAX_WAIT_S = 60;

type Target =
  | { kind: 'create'; model?: string }
  | { kind: 'get' | 'cancel'; id: string }
  | { kind: 'model'; model: string }
  | { kind: 'account' }
  | { kind: 'none' };

function parsePath(method: string | undefined, path: string): Target {
  const p = path.split('/');
  if (method === 'POST' && p.length === 4 && p[0] === 'models' && p[3] === 'predictions' && p[1] && p[2])
    return { kind: 'create', model: `${p[1]}/${p[2]}` };
  if (method === 'POST' && path === 'predictions') return { kind: 'create' };
  if (method === 'GET' && path === 'account') return { kind: 'account' };
  if (method === 'GET' && p.length === 3 && p[0] === 'models' && p[1] && p[2])
    return { kind: 'model', model: `${p[1]}/${p[2]}` };
  if (p[0] === 'predictions' && p[1] && method === 'GET' && p.length === 2) return { kind: 'get', id: p[1] };
  if (p[0] === 'predictions' && p[1] && method === 'POST' && p.length === 3 && p[2] === 'cancel')
    return { kind: 'cancel', id: p[1] };
  return { kind: 'none' };
}

const TEMPLATES: Record<Target['kind'], string> = {
  create: 'POST /replicate/v1/models/{owner}/{name}/predictions',
  get: 'GET /replicate/v1/predictions/{id}',
  cancel: 'POST /replicate/v1/predictions/{id}/cancel',
  model: 'GET /replicate/v1/models/{owner}/{name}',
  account: 'GET /replicate/v1/account',
  none: '/replicate/v1/{other}',
};

/** `Cancel-After` as Go durations are written (`90s`, `1m`, `1h30m`, `500ms`), in ms; NaN when unreadable. */
export function cancelAfterMs(header: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const text = header.trim();
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(text)) return NaN;
  let ms = 0;
  for (const [, n, unit] of text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g))
    ms += Number(n) * (units[unit ?? 's'] ?? 0);
  return ms;
}

/** The status Replicate shows for the job now. */
function statusOf(state: SimulatorState, job: Job): string {
  const raw = state.jobStatus(job);
  if (raw === 'queued') return 'starting';
  if (raw === 'running') return 'processing';
  if (raw === 'completed') return 'succeeded';
  const code = job.outcome.status === 'failed' ? job.outcome.code : '';
  return code === 'canceled' || code === 'aborted' ? code : 'failed';
}

/** The prediction object; on create always `starting` unless the answer was held until it finished. */
function view(state: SimulatorState, origin: string, job: Job, atCreate: boolean) {
  let status = atCreate && state.jobStatus(job) === 'queued' ? 'starting' : statusOf(state, job);
  if (!atCreate && (status === 'starting' || status === 'processing') && state.roll('unknownStatus'))
    status = 'booting';
  const base = `${origin}/replicate/v1/predictions/${encodeURIComponent(job.id)}`;
  // Past an hour (the simulator's `jobTtlSeconds`), or forgotten (job-faults.ts): the record stays, its data goes.
  const removed = !atCreate && (state.isGone(job) || job.badAnswer === 'status_unknown');
  const finished = ['succeeded', 'failed', 'canceled', 'aborted'].includes(status);
  const succeeded = status === 'succeeded' && !removed && job.badAnswer !== 'no_url';
  return {
    id: job.id,
    model: job.model,
    version: 'hidden',
    input: removed ? {} : { prompt: job.prompt },
    logs: '',
    output: succeeded ? resultUrl(state, origin, job, true) : null,
    data_removed: removed,
    error: status === 'failed' && job.outcome.status === 'failed' ? job.outcome.message : null,
    status,
    source: 'api',
    created_at: iso(job.createdAt),
    ...(status !== 'starting' ? { started_at: iso(job.startsAt) } : {}),
    ...(finished ? { completed_at: iso(job.doneAt) } : {}),
    ...(finished && status !== 'aborted'
      ? { metrics: { predict_time: (job.doneAt - job.startsAt) / 1000 } }
      : {}),
    urls: { get: base, cancel: `${base}/cancel` },
  };
}

/** What the model makes of an input: the clip it asks for, or the fields it rejects (422, no prediction). */
function readInput(model: string, input: Record<string, unknown>) {
  const spec = REPLICATE_MODELS[model]!;
  const invalid: { type: string; field: string; description: string }[] = [];
  const { prompt, resolution, duration } = input;
  if (typeof prompt !== 'string' || !prompt.trim())
    invalid.push({ type: 'required', field: 'input.prompt', description: 'prompt is required' });
  if (spec.resolutions && resolution !== undefined && !spec.resolutions.includes(resolution as string)) {
    const list = spec.resolutions.map((r) => `"${r}"`).join(', ');
    invalid.push({
      type: 'enum',
      field: 'input.resolution',
      description: `resolution must be one of the following: ${list}`,
    });
  }
  const [min, max] = spec.durations ?? [0, 0];
  if (
    spec.durations &&
    duration !== undefined &&
    !(Number.isInteger(duration) && (duration as number) >= min && (duration as number) <= max)
  ) {
    const description = Number.isInteger(duration)
      ? `Must be ${(duration as number) < min ? `greater than or equal to ${min}` : `less than or equal to ${max}`}`
      : `Invalid type. Expected: integer, given: ${typeof duration}`;
    invalid.push({
      type: Number.isInteger(duration) ? 'number_range' : 'invalid_type',
      field: 'input.duration',
      description,
    });
  }
  if (invalid.length)
    return {
      problem: {
        title: 'Input validation failed',
        detail: invalid.map((f) => `- ${f.field}: ${f.description}\n`).join(''),
        status: 422,
        invalid_fields: invalid,
      },
    };
  return {
    prompt: prompt as string,
    resolution: ((spec.resolutions ? resolution : undefined) as string | undefined) ?? spec.fixed.resolution,
    duration: ((spec.durations ? duration : undefined) as number | undefined) ?? spec.fixed.duration,
  };
}

/** POST .../predictions: a new, billable prediction each time (Replicate takes no idempotency key). */
async function create(
  { req, res, key, state, origin }: DialectRequest,
  pathModel?: string,
): Promise<DialectResult> {
  const body = (await readJson(req)) as { input?: unknown; version?: unknown } | null;
  const model = pathModel ?? (typeof body?.version === 'string' ? body.version.split(':')[0] : undefined);
  if (!model || !REPLICATE_MODELS[model])
    throw new HttpError(404, 'not_found', 'The requested resource could not be found.');
  requireModel(key, model, Object.keys(REPLICATE_MODELS));
  if (!body || typeof body.input !== 'object' || body.input === null || Array.isArray(body.input))
    return {
      status: 422,
      body: { title: 'Input validation failed', detail: '- input: input is required\n', status: 422 },
    };
  const input = readInput(model, body.input as Record<string, unknown>);
  if ('problem' in input) return { status: 422, body: input.problem };
  const deadline = cancelAfterMs(String(req.headers['cancel-after'] ?? '0s'));
  if (Number.isNaN(deadline))
    throw new HttpError(400, 'bad_request', 'Cancel-After must be a duration such as 5m or 1h30m.');
  // Replicate throttles creates harder when credit runs low: the running-jobs cap stands in for that.
  const wait = state.runningCapWait(key.id);
  if (wait > 0) throw tooMany(state, 'too_many_running_jobs', 'rate_limited', 'Request was throttled.', wait);
  const job = state.createJob(key.id, {
    model,
    input: { prompt: input.prompt },
    parameters: { resolution: input.resolution.toUpperCase(), duration: input.duration },
  });
  if (deadline > 0) {
    const at = job.createdAt + deadline;
    // Decided now, since the job's times are: aborted (not billed) if it would not have started, else canceled.
    if (job.startsAt >= at)
      endJob(state, job, 'aborted', 'Prediction deadline exceeded before it started.', at);
    else endJob(state, job, 'canceled', 'Prediction deadline exceeded.', at);
  }
  const prefer = /^wait(?:=(\d+))?$/i.exec(String(req.headers.prefer ?? '').trim());
  if (prefer) {
    const holdMs = Math.min(Number(prefer[1] ?? MAX_WAIT_S), MAX_WAIT_S) * 1000;
    const ms = Math.max(0, Math.min(holdMs, job.doneAt - state.now()));
    // The client gave up while the answer was held: billed, and it never learns the id.
    if (ms > 0 && (await waitUnlessClosed(res, ms))) state.countAmbiguousSubmit('slow');
  }
  return { status: 201, body: view(state, origin, job, !prefer), job, created: true };
}

/** POST .../cancel: an unfinished prediction stops (and stops billing); a finished one is answered as it is. */
function cancel(state: SimulatorState, origin: string, job: Job): DialectResult {
  endJob(state, job, 'canceled', 'Prediction was canceled.');
  return { status: 200, body: view(state, origin, job, false), job };
}

async function handle(request: DialectRequest): Promise<DialectResult> {
  const { req, path, state, origin, key } = request;
  const target = parsePath(req.method, path);
  if (target.kind === 'none') throw new HttpError(404, 'not_found', 'Not found.');
  if (target.kind === 'create') return create(request, target.model);
  if (target.kind === 'account') {
    // The key check passed before the route: every key of the simulator is one account's.
    const username = `sim-${key.id}`;
    return { status: 200, body: { type: 'user', username, name: username, github_url: null } };
  }
  if (target.kind === 'model') {
    if (!REPLICATE_MODELS[target.model]) throw new HttpError(404, 'not_found', 'Not found.');
    const [owner, name] = target.model.split('/');
    const visible = !key.models || key.models.includes(target.model);
    if (!visible) throw new HttpError(403, 'forbidden', `This token has no access to ${target.model}.`);
    return {
      status: 200,
      body: { url: `https://replicate.com/${target.model}`, owner, name, visibility: 'public' },
    };
  }
  const job = jobOf(state, target.id, (model) => model in REPLICATE_MODELS);
  if (!job) throw new HttpError(404, 'not_found', 'Not found.');
  if (target.kind === 'cancel') return cancel(state, origin, job);
  job.checks = (job.checks ?? 0) + 1;
  if (state.isGone(job)) state.stats.goneQueries += 1;
  if (job.badAnswer === 'gone') {
    state.stats.goneQueries += 1;
    throw new HttpError(404, 'not_found', 'Not found.');
  }
  if (job.badAnswer === 'error5xx') throw new HttpError(500, 'internal_error', 'Internal server error.');
  const body = view(state, origin, job, false);
  return { status: 200, body, job, carriesResult: body.output !== null };
}

const TITLES: Record<number, string> = {
  400: 'Bad request',
  401: 'Unauthenticated',
  403: 'Forbidden',
  404: 'Not found',
  429: 'Too many requests',
  500: 'Internal server error',
  503: 'Service unavailable',
};

export const replicateDialect: Dialect = {
  prefix: '/replicate/v1/',
  secret: (authorization) => schemeSecret('Bearer', authorization),
  route: (method, path) => {
    const kind = parsePath(method, path).kind;
    if (kind === 'create' && path === 'predictions') return 'POST /replicate/v1/predictions';
    return kind === 'none' ? `${method} ${TEMPLATES.none}` : TEMPLATES[kind];
  },
  kind: (method, path) => {
    const kind = parsePath(method, path).kind;
    return kind === 'create' ? 'submit' : kind === 'get' ? 'status' : 'other';
  },
  handle,
  errorAnswer: (e, state) => {
    if (e.status === 429) {
      const ms = parseRetryAfter(e.headers['retry-after'] ?? '', state.now()) ?? 1000;
      const detail = `Request was throttled. Your rate limit resets in ~${Math.max(1, Math.ceil(ms / 1000))}s.`;
      return { body: { detail, status: 429 } };
    }
    const detail = e.status === 401 ? 'You did not pass a valid authentication token' : e.message;
    return { body: { title: TITLES[e.status] ?? 'Error', detail, status: e.status } };
  },
};
