// fal's queue dialect (https://queue.fal.run). Written from the public references:
// - Queue API: https://docs.fal.ai/model-endpoints/queue and
//   https://fal.ai/docs/documentation/model-apis/inference/queue (POST /{model_id} with the model's input as the
//   JSON body answers request_id, response_url, status_url, cancel_url; GET .../requests/{id}/status answers
//   IN_QUEUE (with queue_position), IN_PROGRESS, COMPLETED; GET .../requests/{id} is the result; a model id
//   with a sub-path, such as fal-ai/wan-25-preview/text-to-video, is submitted whole but its status, result
//   and cancel URLs use the app, fal-ai/wan-25-preview, only)
// - Inference API: https://fal.ai/docs/api-reference/inference-api (`Authorization: Key <key>`; 202 while
//   queued or in progress, 200 when completed; use the URLs the submit answer gives)
// - Cancel: https://fal.ai/docs/inference-api/queue/cancel (PUT .../cancel; CANCELLATION_REQUESTED,
//   ALREADY_COMPLETED, NOT_FOUND)
// - Errors: https://fal.ai/docs/documentation/model-apis/request-errors (`{ detail, error_type }`) and fal's
//   error reference, docs.fal.ai/errors (`{ detail: [{ loc, msg, type, ctx }] }`, 422 for input and content;
//   read in its copy at henjicc/Henji-AI, docs/api/fal/base/errors.md)
// - fal-ai/fal-js, libs/client/src/queue.ts, request.ts, types/common.ts (shapes; the client itself retries a
//   submit on 429 and 5xx, which can pay twice: this adapter never does, the transport makes one call)
// - github.com/TanStack/ai/pull/396 (a failed request still ends COMPLETED; its error comes with the result) and
//   github.com/fal-ai/fal/pull/1143 (a COMPLETED status carries `error` and `error_type` when it failed)
// - The model page of fal-ai/wan-25-preview/text-to-video,
//   https://fal.ai/models/fal-ai/wan-25-preview/text-to-video/api
//   (the default model: `resolution` "480p", "720p", "1080p"; `duration` "5" or "10", strings; output
//   `{ video: { url, content_type } }`; read in its copy at henjicc/Henji-AI, docs/api/fal/wan/)
//
// What it maps: the row's `input.*` (prompt included) and `parameters.*` columns become fields of the JSON
// input, as fal's inputs are flat; `resolution` 720P becomes "720p" and `duration` 5 becomes "5", the way fal's
// video models spell them. The values are checked for the models named below only; other models get the same
// mapping and check their input themselves (a refusal then comes as a failed request, after it was queued).
//
// Where this had to assume:
// - No idempotency key: fal takes none, so none is sent; a lost submit answer is handled by vidbatch's
//   unknown-outcome policy and its journal.
// - The job id is `<app>/requests/<request_id>`, read from the answer's response_url, so checks use the app
//   prefix the way fal builds its URLs, on whatever host the base URL names (queue.fal.run, or a proxy).
// - A COMPLETED status without `error` has its result fetched in the same check; one with `error` is failed,
//   `error_type` (or the result's 422 `type`) its code.
// - 429: fal's queue does not refuse for concurrency (requests wait in the queue, and fal retries its own 429s
//   there: https://docs.fal.ai/model-apis/model-endpoints/reliability); a 429 is a rate limit, honoured
//   through Retry-After when sent, else the transport's default wait: no reference gives a wait in its body.
// - No key check for doctor: the queue has no call that checks a key without making a job. The Platform API's
//   pricing (https://docs.fal.ai/platform-apis/v1/models/pricing, "Authentication: Required") would, but it is
//   on another host (api.fal.ai) than the queue, and the key goes only to the base URL's origin; its model
//   listing takes a key only optionally. So the first submit checks the key: a 401 there makes no job.
import { z } from 'zod';
import type { GenerationRequest, Problem, ProviderAdapter, ProviderJob } from '../provider';
import { canonicalStatus } from '../status';

export const FAL_DEFAULT_MODEL = 'fal-ai/wan-25-preview/text-to-video';

/** What the models whose input the reference gives take, in fal's spelling. */
export const FAL_MODEL_VALUES: Record<string, { resolutions: string[]; durations: string[] }> = {
  [FAL_DEFAULT_MODEL]: { resolutions: ['480p', '720p', '1080p'], durations: ['5', '10'] },
};

/** App namespaces whose ids have three segments before the endpoint path (fal-js utils.ts). */
const NAMESPACES = new Set(['workflows', 'comfy']);

/** Fields of the CSV that map onto fal's own spelling. */
const MAPPED = new Set(['resolution', 'duration']);

const statusBody = z.looseObject({
  status: z.string().min(1).optional(),
  request_id: z.string().min(1).optional(),
  response_url: z.string().min(1),
  error: z.unknown().optional(),
  error_type: z.string().nullish(),
});

const resultBody = z.looseObject({
  video: z.looseObject({ url: z.string().optional() }).nullish(),
});

const errorBody = z.looseObject({
  detail: z
    .union([
      z.string(),
      z.array(
        z.looseObject({
          loc: z.array(z.union([z.string(), z.number()])).optional(),
          msg: z.string().optional(),
          type: z.string().optional(),
        }),
      ),
    ])
    .optional(),
  error_type: z.string().optional(),
  // The cancel answers' word (ALREADY_COMPLETED, NOT_FOUND).
  status: z.string().optional(),
});

/** `owner/app[/path]`, each segment URL-safe as it goes into a path. */
const isModelId = (model: string) => /^[\w.-]+(\/[\w.-]+)+$/.test(model);

/**
 * The job id of an answer: `<app>/requests/<request_id>` from its response_url (the segments before `requests`
 * that are the app: two, or three in a namespace), whatever host and path prefix the URL has.
 */
function jobIdOf(responseUrl: string): string | undefined {
  if (!URL.canParse(responseUrl)) return undefined;
  const parts = new URL(responseUrl).pathname.split('/').filter(Boolean);
  const at = parts.lastIndexOf('requests');
  if (at < 2 || at !== parts.length - 2) return undefined;
  const appLength = NAMESPACES.has(parts[at - 3] ?? '') ? 3 : 2;
  return [...parts.slice(at - appLength, at), 'requests', parts[at + 1]].join('/');
}

function resolutionOf(parameters: Record<string, unknown>): string | undefined {
  return typeof parameters.resolution === 'string' ? parameters.resolution.toLowerCase() : undefined;
}

function durationOf(parameters: Record<string, unknown>): string | undefined {
  const { duration } = parameters;
  if (duration === undefined || duration === null) return undefined;
  return typeof duration === 'number' || typeof duration === 'string'
    ? String(duration)
    : JSON.stringify(duration);
}

function validate({ model, parameters = {} }: GenerationRequest): string | undefined {
  if (!isModelId(model))
    return `model ${model} is not a fal model id (owner/app[/path], such as ${FAL_DEFAULT_MODEL})`;
  const values = FAL_MODEL_VALUES[model];
  if (!values) return undefined;
  const resolution = resolutionOf(parameters);
  if (resolution !== undefined && !values.resolutions.includes(resolution))
    return `resolution ${resolution.toUpperCase()} is not one ${model} takes: ${values.resolutions.map((r) => r.toUpperCase()).join(', ')}`;
  const duration = durationOf(parameters);
  if (duration !== undefined && !values.durations.includes(duration))
    return `duration ${duration} is not one ${model} takes: ${values.durations.join(' or ')} seconds`;
  return undefined;
}

function input({ input: fields, parameters = {} }: GenerationRequest): Record<string, unknown> {
  const resolution = resolutionOf(parameters);
  const duration = durationOf(parameters);
  const extra = Object.fromEntries(Object.entries(parameters).filter(([name]) => !MAPPED.has(name)));
  return {
    ...extra,
    ...fields,
    ...(resolution !== undefined ? { resolution } : {}),
    ...(duration !== undefined ? { duration } : {}),
  };
}

/** An error field as text: fal sends a string; anything else is shown as JSON. */
const textOf = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value));

/** The result of a completed request: its video URL, when it has one. */
function readResult(json: unknown): ProviderJob | Problem {
  const parsed = resultBody.safeParse(json);
  if (!parsed.success)
    return { problem: `result has an unexpected shape: ${parsed.error.issues[0]?.message}` };
  const url = parsed.data.video?.url;
  // The id is the transport's (the one the check was made for).
  return { id: '', status: 'completed', rawStatus: 'COMPLETED', ...(url ? { url } : {}) };
}

function readJob(json: unknown): ProviderJob | Problem {
  const parsed = statusBody.safeParse(json);
  if (!parsed.success)
    return { problem: `queue answer has an unexpected shape: ${parsed.error.issues[0]?.message}` };
  const { status = 'IN_QUEUE', response_url: responseUrl, error, error_type: errorType } = parsed.data;
  const id = jobIdOf(responseUrl);
  if (!id) return { problem: `queue answer's response_url is not a request URL: ${responseUrl}` };
  const job = { id, status: canonicalStatus(status), rawStatus: status };
  if (status !== 'COMPLETED') return job;
  if (error !== undefined && error !== null) {
    return {
      ...job,
      status: 'failed',
      error: { code: errorType ?? 'request_failed', message: textOf(error) },
    };
  }
  return { ...job, follow: { call: { method: 'GET', path: `/${id}` }, read: readResult } };
}

function readError(json: unknown): { code?: string; message?: string } | undefined {
  const parsed = errorBody.safeParse(json);
  if (!parsed.success) return undefined;
  const { detail, error_type: errorType, status } = parsed.data;
  if (typeof detail === 'string') return { ...(errorType ? { code: errorType } : {}), message: detail };
  if (detail?.length) {
    const message = detail
      .map(({ loc = [], msg = '' }) => `${loc.filter((l) => l !== 'body').join('.') || 'input'}: ${msg}`)
      .join('; ');
    const code = errorType ?? detail[0]?.type;
    return { ...(code ? { code } : {}), message };
  }
  return status ? { code: status, message: status } : undefined;
}

export const fal: ProviderAdapter = {
  name: 'fal',
  defaultModel: FAL_DEFAULT_MODEL,
  // Values the default model takes (5 or 10 s; its own default resolution, 1080p, costs more than 720p).
  defaults: { resolution: '720P', duration: 5 },
  exampleBaseUrl: 'https://queue.fal.run',
  checkBaseUrl: (baseUrl) => {
    if (!/^https?:\/\/[^/?#]+(\/[^?#]*)?$/.test(baseUrl))
      return 'must be an http(s) URL without a query (such as https://queue.fal.run)';
    // fal.run is the synchronous API: no request ids to check, no queue to wait in, no retries.
    if (/^https?:\/\/fal\.run(\/|$)/i.test(baseUrl))
      return 'must be the queue (https://queue.fal.run), not fal.run';
    return undefined;
  },
  authorization: (key) => ({ authorization: `Key ${key}` }),
  submit: (request) => ({ method: 'POST', path: `/${request.model}`, body: input(request) }),
  check: (jobId) => ({ method: 'GET', path: `/${jobId}/status` }),
  readJob,
  readError,
  videoNeedsKey: false,
  validate,
  cancel: (jobId) => ({ method: 'PUT', path: `/${jobId}/cancel` }),
  // A queued request is removed; a running one is only signalled, and its app may finish it and bill.
  cancelStops: (rawStatus) => rawStatus === 'IN_QUEUE',
};
