// Replicate's predictions dialect (https://api.replicate.com/v1). Written from the public references:
// - HTTP API: https://sdks.replicate.com/typescript/resources/predictions
//   (POST /v1/models/{owner}/{name}/predictions with `{ input }`, POST /v1/predictions with `version` for a
//   model pinned to a version, GET /v1/predictions/{id}, POST /v1/predictions/{id}/cancel; the prediction's
//   id, status, output, error, data_removed and urls.get/cancel; Bearer auth)
// - https://replicate.com/docs/topics/predictions/lifecycle and
//   https://replicate.com/changelog/2025-10-16-prediction-deadlines (starting, processing, succeeded, failed,
//   canceled; aborted: a `Cancel-After` deadline passed before it started, not billed)
// - https://replicate.com/docs/topics/predictions/data-retention and .../output-files (an API prediction's
//   output, files included, is removed after an hour: `data_removed`; files on replicate.delivery)
// - https://replicate.com/docs/topics/predictions/rate-limits (429 `{"detail":"Request was throttled. Your rate
//   limit resets in ~30s."}`; an earlier version of the page: `Expected available in 1 second.`; no header named)
// - Accounts: GET /v1/account (https://sdks.replicate.com/typescript/resources/account; the account of the
//   token: `{ type, username, name, github_url }`), the cheap authenticated call doctor makes
// - replicate/replicate-javascript, index.d.ts and lib/ (statuses including `aborted`; `output` a URL or an
//   array of them; the client retries a create on 429 only, which made no prediction)
// - A 422 as the API sends it: `{ detail, status, title: "Input validation failed", invalid_fields }` (quoted in
//   Lazyjimpressions/ourvidz, RV51_GENERATION_FAILURE_ANALYSIS.md)
// - The default model, bytedance/seedance-1-lite: ByteDance's Seedance 1.0 Lite reference, as mirrored at
//   https://docs.modellix.ai/bytedance/seedance-1-0-lite-t2v (`duration` 2-12 whole seconds, `resolution`
//   "480p", "720p", "1080p"), and Replicate's pages of the same family, such as
//   https://replicate.com/bytedance/seedance-2.0 (an integer `duration`; output one URI). That Replicate's
//   seedance-1-lite takes the same 2-12 s as ByteDance's own API is assumed.
//
// What it maps: the row's `input.*` (prompt included) and `parameters.*` columns become fields of `input`;
// `resolution` 720P becomes "720p" and `duration` stays a whole number, the way Replicate's video models
// spell them. The values are checked for the models named below only; for any other, Replicate checks the
// input against the model's schema and refuses it with a 422 before any prediction is made.
//
// Where this had to assume:
// - No idempotency key: Replicate takes none, so none is sent; a lost create answer is handled by vidbatch's
//   unknown-outcome policy and its journal. No `Prefer: wait` either: holding the create open only makes its
//   answer likelier to be lost.
// - A succeeded prediction whose data was removed (past its hour) has no video to fetch: `gone`, so the row
//   keeps its prediction id and nothing is paid again.
// - A 429's wait comes from Retry-After when sent; without it, from the `resets in ~Ns` (or `Expected
//   available in N seconds`) of its detail, which the reference shows as the only place the wait is given.
import { z } from 'zod';
import type { GenerationRequest, Problem, ProviderAdapter, ProviderJob } from '../provider';
import type { CanonicalStatus } from '../status';
import { canonicalStatus } from '../status';

export const REPLICATE_DEFAULT_MODEL = 'bytedance/seedance-1-lite';

/** What the models whose input the reference gives take: resolutions, and whole seconds from-to. */
export const REPLICATE_MODEL_VALUES: Record<string, { resolutions: string[]; seconds: [number, number] }> = {
  [REPLICATE_DEFAULT_MODEL]: { resolutions: ['480p', '720p', '1080p'], seconds: [2, 12] },
};

const STATUSES: Record<string, CanonicalStatus> = {
  starting: 'queued',
  processing: 'running',
  succeeded: 'completed',
  failed: 'failed',
  canceled: 'failed',
  aborted: 'failed',
};

/** Fields of the CSV that map onto Replicate's spelling. */
const MAPPED = new Set(['resolution', 'duration']);

const predictionBody = z.looseObject({
  id: z.string().min(1),
  status: z.string().min(1),
  output: z.unknown().optional(),
  error: z.unknown().optional(),
  data_removed: z.boolean().optional(),
});

const errorBody = z.looseObject({
  detail: z.string().optional(),
  title: z.string().optional(),
  invalid_fields: z
    .array(z.looseObject({ field: z.string().optional(), description: z.string().optional() }))
    .optional(),
});

/** `owner/name`, or `owner/name:version`. */
const MODEL_ID = /^([\w.-]+\/[\w.-]+)(?::([\w.-]+))?$/;

function resolutionOf(parameters: Record<string, unknown>): string | undefined {
  return typeof parameters.resolution === 'string' ? parameters.resolution.toLowerCase() : undefined;
}

function validate({ model, parameters = {} }: GenerationRequest): string | undefined {
  if (!MODEL_ID.test(model))
    return `model ${model} is not a Replicate model (owner/name or owner/name:version, such as ${REPLICATE_DEFAULT_MODEL})`;
  const values = REPLICATE_MODEL_VALUES[model.split(':')[0] ?? ''];
  if (!values) return undefined;
  const resolution = resolutionOf(parameters);
  if (resolution !== undefined && !values.resolutions.includes(resolution))
    return `resolution ${resolution.toUpperCase()} is not one ${model} takes: ${values.resolutions.map((r) => r.toUpperCase()).join(', ')}`;
  const { duration } = parameters;
  const [min, max] = values.seconds;
  if (
    duration !== undefined &&
    !(Number.isInteger(duration) && Number(duration) >= min && Number(duration) <= max)
  )
    return `duration ${JSON.stringify(duration)} is not one ${model} takes: ${min} to ${max} whole seconds`;
  return undefined;
}

function body({ model, input, parameters = {} }: GenerationRequest): Record<string, unknown> {
  const resolution = resolutionOf(parameters);
  const extra = Object.fromEntries(Object.entries(parameters).filter(([name]) => !MAPPED.has(name)));
  const fields = {
    ...extra,
    ...input,
    ...(resolution !== undefined ? { resolution } : {}),
    ...(parameters.duration !== undefined ? { duration: parameters.duration } : {}),
  };
  const version = MODEL_ID.exec(model)?.[2];
  return version ? { version: model, input: fields } : { input: fields };
}

/** The first URL of an output: a URL, an array of them, or an object with a `url`. */
function urlOf(output: unknown): string | undefined {
  const first = Array.isArray(output) ? (output as unknown[])[0] : output;
  const url = typeof first === 'string' ? first : (first as { url?: unknown } | null | undefined)?.url;
  return typeof url === 'string' && URL.canParse(url) ? url : undefined;
}

function readJob(json: unknown): ProviderJob | Problem {
  const parsed = predictionBody.safeParse(json);
  if (!parsed.success)
    return { problem: `prediction has an unexpected shape: ${parsed.error.issues[0]?.message}` };
  const { id, status, output, error, data_removed: removed } = parsed.data;
  const url = urlOf(output);
  const canonical = STATUSES[status] ?? canonicalStatus(status);
  const job: ProviderJob = { id, status: canonical, rawStatus: status };
  if (canonical === 'completed' && !url && removed) return { ...job, status: 'gone' };
  if (canonical === 'completed') return { ...job, ...(url ? { url } : {}) };
  if (canonical !== 'failed') return job;
  const message = typeof error === 'string' ? error : error ? JSON.stringify(error) : `prediction ${status}`;
  return { ...job, error: { code: status === 'failed' ? 'prediction_failed' : status, message } };
}

function readError(json: unknown): { code?: string; message?: string } | undefined {
  const parsed = errorBody.safeParse(json);
  if (!parsed.success) return undefined;
  const { detail, title, invalid_fields: fields } = parsed.data;
  const listed = fields?.map((f) => `${f.field ?? 'input'}: ${f.description ?? ''}`).join('; ');
  const message = listed || detail?.trim() || title;
  return message === undefined ? undefined : { ...(title ? { code: title } : {}), message };
}

/** The wait a throttling 429's detail words (`resets in ~30s`, `Expected available in 1 second`), in ms. */
function readRetryAfter(json: unknown): number | undefined {
  const parsed = errorBody.safeParse(json);
  const detail = parsed.success ? parsed.data.detail : undefined;
  if (!detail) return undefined;
  const m =
    /resets in ~?\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?)\b/i.exec(detail) ??
    /available in ~?\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?)\b/i.exec(
      detail,
    );
  if (!m) return undefined;
  const unit = (m[2] ?? 's').toLowerCase();
  const scale = unit === 'ms' || unit.startsWith('milli') ? 1 : unit.startsWith('m') ? 60_000 : 1000;
  return Number(m[1]) * scale;
}

const predictionPath = (id: string) => `/predictions/${encodeURIComponent(id)}`;

export const replicate: ProviderAdapter = {
  name: 'replicate',
  defaultModel: REPLICATE_DEFAULT_MODEL,
  // Values the default model takes (2 to 12 s; 480p, 720p or 1080p).
  defaults: { resolution: '720P', duration: 5 },
  exampleBaseUrl: 'https://api.replicate.com/v1',
  checkBaseUrl: (baseUrl) =>
    /^https?:\/\/[^/?#]+(\/[^?#]*)?\/v1$/.test(baseUrl)
      ? undefined
      : 'must be an http(s) URL ending in /v1 (such as https://api.replicate.com/v1)',
  authorization: (key) => ({ authorization: `Bearer ${key}` }),
  submit: (request) => {
    const pinned = MODEL_ID.exec(request.model)?.[2] !== undefined;
    return {
      method: 'POST',
      path: pinned ? '/predictions' : `/models/${request.model}/predictions`,
      body: body(request),
    };
  },
  check: (jobId) => ({ method: 'GET', path: predictionPath(jobId) }),
  readJob,
  readError,
  videoNeedsKey: false,
  validate,
  cancel: (jobId) => ({ method: 'POST', path: `${predictionPath(jobId)}/cancel`, kind: 'status' }),
  keyCheck: { method: 'GET', path: '/account' },
  readRetryAfter,
};
