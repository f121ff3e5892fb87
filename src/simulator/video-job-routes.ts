// The video generation job endpoints (spec 4.1, 4.2): POST /v1/videos/generations submits a job (a new,
// billable one each time unless Idempotency-Key is honoured), GET /v1/videos/generations/{id} reports it.
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { requireModel, type ApiKeyRecord } from './api-keys';
import { HttpError, parseBody, readJson, type V1Result } from './http';
import type { Job } from './jobs';
import { VIDEO_MODELS } from './models-route';
import { tooMany } from './rate-limits';
import { resultUrl } from './result-files';
import type { SimulatorState } from './state';

export const RESOLUTIONS = ['480P', '720P', '1080P'];

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

const JOB_PATH = /^\/v1\/videos\/generations\/([^/]+)$/;

/** Whether a request is a submit, a status query, or neither (the fault `scope` picks among them). */
export function routeKind(method: string | undefined, path: string): 'submit' | 'status' | 'other' {
  if (method === 'POST' && path === '/v1/videos/generations') return 'submit';
  if (method === 'GET' && JOB_PATH.test(path)) return 'status';
  return 'other';
}

/** The job as the gateway shows it: on submit always `queued`; later its status, URL or error. */
function jobView(state: SimulatorState, origin: string, job: Job, forSubmit: boolean) {
  let status = forSubmit ? 'queued' : state.jobStatus(job);
  if (!forSubmit && job.badAnswer === 'status_unknown') status = 'UNKNOWN'; // job-faults.ts: forgotten
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
    view.data = [{ url: resultUrl(state, origin, job, !forSubmit) }];
  } else if (status === 'failed' && job.outcome.status === 'failed') {
    view.error = { code: job.outcome.code, message: job.outcome.message, type: 'error' };
  }
  return view;
}

/** A submit or a status query; undefined for any other request. */
export async function videoJobRoutes(
  req: IncomingMessage,
  path: string,
  key: ApiKeyRecord,
  state: SimulatorState,
  origin: string,
): Promise<V1Result | undefined> {
  const kind = routeKind(req.method, path);
  if (kind === 'submit') {
    const body = parseBody(generationSchema, await readJson(req));
    requireModel(key, body.model, VIDEO_MODELS);
    const idempotencyKey = req.headers['idempotency-key'] as string | undefined;
    const existing = state.idempotentJob(idempotencyKey);
    if (existing) return { status: 200, body: jobView(state, origin, existing, false), job: existing };
    const wait = state.runningCapWait(key.id);
    if (wait > 0) {
      const message = 'Too many jobs running for this key.';
      throw tooMany(state, 'too_many_running_jobs', 'too_many_running_jobs', message, wait);
    }
    const job = state.createJob(key.id, body, idempotencyKey);
    return { status: 200, body: jobView(state, origin, job, true), job, created: true };
  }
  if (kind === 'status') {
    const id = JOB_PATH.exec(path)?.[1] ?? '';
    const job = state.jobs.get(decodeURIComponent(id));
    // Jobs belong to the account, not the key: a rotated key still sees earlier jobs.
    if (!job) throw new HttpError(404, 'not_found', `No job with id ${id}.`);
    job.checks = (job.checks ?? 0) + 1;
    if (state.isGone(job) || job.badAnswer === 'gone') {
      state.stats.goneQueries += 1;
      throw new HttpError(404, 'not_found', `No job with id ${id}.`);
    }
    if (job.badAnswer === 'error5xx') throw new HttpError(500, 'internal_error', 'Internal error.');
    const view = jobView(state, origin, job, false);
    return {
      status: 200,
      body: view,
      job,
      carriesResult: view.status === 'completed' && job.badAnswer === undefined,
    };
  }
  return undefined;
}
