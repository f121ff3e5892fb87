// The OpenAI Videos dialect, as OpenAI defined it and as gateways serve it since: LiteLLM's proxy
// (`/videos`, `/v1/videos`) and OpenRouter's `/api/v1/videos`. Written from the public references:
// - OpenAI API reference, Videos: https://platform.openai.com/docs/api-reference/videos (create, retrieve,
//   content, delete; the video object: id, object "video", model, status, progress, seconds, size, error)
//   and its mirror in Azure AI Foundry's reference (allowed `seconds` 4, 8, 12; `size` 720x1280, 1280x720,
//   1024x1792, 1792x1024): https://learn.microsoft.com/azure/foundry/reference/rest/video-generation-create-video
// - LiteLLM, /videos: https://docs.litellm.ai/docs/videos and https://docs.litellm.ai/docs/providers/openai/videos
// - OpenRouter, video generation: https://openrouter.ai/docs/api_reference/videos
//
// What it maps: POST /videos with JSON { model, prompt, seconds, size, ...the other `input.*` and
// `parameters.*` columns as fields of their own }; GET /videos/{id} (`queued`, `in_progress`, `completed`,
// `failed` with `error { code, message }`); the video from GET /videos/{id}/content, which needs the key;
// DELETE /videos/{id} as cancel; GET /models and POST /chat/completions as OpenAI serves them.
//
// Where this had to assume:
// - No idempotency key: none of the references names one, so none is sent; a lost submit answer is handled by
//   vidbatch's unknown-outcome policy and its journal, never by the provider.
// - `seconds` is sent as a string ("8"), as OpenAI's enum has it; LiteLLM passes it on. The CSV's `duration`
//   maps to it, `resolution` `<n>P` to a landscape size (720P -> 1280x720); `parameters.seconds` and
//   `parameters.size` columns win over them (a portrait 720x1280 has no `<n>P` of its own).
// - The sets of accepted values are checked for OpenAI's own models (`sora-*`) only: a gateway routes other
//   models (Veo, Runway, ...) with sets of their own, which it checks itself.
// - OpenRouter's request fields differ (`duration` a number, `resolution` such as "720p", `aspect_ratio`), and
//   its error is a string: errors of both shapes are read, and a completed job's `unsigned_urls[0]` (its
//   authenticated content URL) is used when given; OpenRouter's own request fields must be given as
//   `parameters.*` columns.
// - DELETE /videos/{id} is taken to stop a job that has not finished (the reference calls it deleting a video).
// - A status outside the four (OpenRouter's `pending`, `cancelled`, `expired`) maps through status.ts.
import { z } from 'zod';
import type { GenerationRequest, Problem, ProviderAdapter, ProviderJob } from '../provider';
import { canonicalStatus } from '../status';
import { openAiModels } from './model-gateway';

/** What OpenAI's own models take (the Azure mirror of the reference lists the same sets). */
export const SORA_SECONDS = ['4', '8', '12'];
export const SORA_SIZES = ['720x1280', '1280x720', '1024x1792', '1792x1024'];
/** The sizes only `sora-2-pro` renders. */
const PRO_ONLY_SIZES = new Set(['1024x1792', '1792x1024']);

/** The landscape frame of a `<n>P` resolution, for the common ones. */
const SIZE_OF_RESOLUTION: Record<string, string> = {
  '480P': '854x480',
  '720P': '1280x720',
  '1080P': '1920x1080',
};

/** Fields of the CSV that map onto the body's own, never sent under their CSV names. */
const MAPPED = new Set(['prompt', 'duration', 'resolution', 'seconds', 'size']);

const jobBody = z.looseObject({
  id: z.string().min(1),
  status: z.string().min(1),
  error: z
    .union([z.string(), z.looseObject({ code: z.string().nullish(), message: z.string().nullish() })])
    .nullish(),
  unsigned_urls: z.array(z.string()).nullish(),
});

const errorBody = z.looseObject({
  error: z.union([z.string(), z.looseObject({ code: z.string().nullish(), message: z.string().nullish() })]),
});

const isSora = (model: string) => /^(openai\/)?sora-/i.test(model);

/** A CSV value as the text a field takes (a `parameters.*` column may hold JSON). */
function text(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function secondsOf(parameters: Record<string, unknown>): string | undefined {
  return text(parameters.seconds ?? parameters.duration);
}

function sizeOf(parameters: Record<string, unknown>): string | undefined {
  const size = text(parameters.size);
  if (size !== undefined) return size;
  const resolution = parameters.resolution;
  if (typeof resolution !== 'string') return undefined;
  return SIZE_OF_RESOLUTION[resolution.toUpperCase()];
}

function validate({ model, parameters = {} }: GenerationRequest): string | undefined {
  const seconds = secondsOf(parameters);
  const size = sizeOf(parameters);
  const { resolution } = parameters;
  if (size === undefined && typeof resolution === 'string')
    return `resolution ${resolution} has no OpenAI-Videos size: use 480P, 720P or 1080P, or give parameters.size (such as 1280x720)`;
  if (isSora(model)) {
    if (seconds !== undefined && !SORA_SECONDS.includes(seconds))
      return `duration ${seconds} is not one ${model} takes: ${SORA_SECONDS.join(', ')} seconds`;
    const sizes = /pro/i.test(model) ? SORA_SIZES : SORA_SIZES.filter((s) => !PRO_ONLY_SIZES.has(s));
    if (size !== undefined && !sizes.includes(size))
      return `size ${size} is not one ${model} takes: ${sizes.join(', ')} (720P maps to 1280x720; give parameters.size for another)`;
    return undefined;
  }
  if (seconds !== undefined && !/^[1-9]\d*$/.test(seconds))
    return `duration ${seconds} is not a whole number of seconds`;
  if (size !== undefined && !/^[1-9]\d*x[1-9]\d*$/.test(size))
    return `size ${size} is not <width>x<height> (such as 1280x720)`;
  return undefined;
}

function body({ model, input, parameters = {} }: GenerationRequest): Record<string, unknown> {
  const seconds = secondsOf(parameters);
  const size = sizeOf(parameters);
  const extra = Object.fromEntries(
    [...Object.entries(input), ...Object.entries(parameters)].filter(([name]) => !MAPPED.has(name)),
  );
  return {
    ...extra,
    model,
    prompt: input.prompt,
    ...(seconds !== undefined ? { seconds } : {}),
    ...(size !== undefined ? { size } : {}),
  };
}

/** A string error (OpenRouter) or an object one (OpenAI), as code and message. */
function errorOf(error: string | { code?: string | null; message?: string | null }) {
  if (typeof error === 'string') return { message: error };
  return {
    ...(error.code ? { code: error.code } : {}),
    ...(error.message ? { message: error.message } : {}),
  };
}

const contentPath = (id: string) => `/videos/${encodeURIComponent(id)}/content`;

function readJob(json: unknown): ProviderJob | Problem {
  const parsed = jobBody.safeParse(json);
  if (!parsed.success)
    return { problem: `video response has an unexpected shape: ${parsed.error.issues[0]?.message}` };
  const { id, status, error, unsigned_urls: unsigned } = parsed.data;
  const canonical = canonicalStatus(status);
  const given = unsigned?.[0];
  // The video is served by the API itself: a path on the base URL, fetched with the key.
  const url =
    canonical !== 'completed'
      ? undefined
      : given && (given.startsWith('/') || URL.canParse(given))
        ? given
        : contentPath(id);
  return {
    id,
    status: canonical,
    rawStatus: status,
    ...(url ? { url } : {}),
    ...(error ? { error: errorOf(error) } : {}),
  };
}

export const openAiVideos: ProviderAdapter = {
  name: 'openai-videos',
  defaultModel: 'sora-2',
  // sora-2 takes 4, 8 or 12 s (4 is OpenAI's own default) and 1280x720, which 720P maps to.
  defaults: { resolution: '720P', duration: 4 },
  exampleBaseUrl: 'http://localhost:4000/v1',
  // LiteLLM serves the dialect at its root and under /v1, OpenRouter under /api/v1: any http(s) base will do.
  checkBaseUrl: (baseUrl) =>
    /^https?:\/\/[^/?#]+(\/[^?#]*)?$/.test(baseUrl)
      ? undefined
      : 'must be an http(s) URL without a query (such as http://localhost:4000/v1)',
  authorization: (key) => ({ authorization: `Bearer ${key}` }),
  submit: (request) => ({ method: 'POST', path: '/videos', body: body(request) }),
  check: (jobId) => ({ method: 'GET', path: `/videos/${encodeURIComponent(jobId)}` }),
  readJob,
  readError: (json) => {
    const parsed = errorBody.safeParse(json);
    return parsed.success ? errorOf(parsed.data.error) : undefined;
  },
  videoNeedsKey: true,
  validate,
  cancel: (jobId) => ({ method: 'DELETE', path: `/videos/${encodeURIComponent(jobId)}` }),
  models: openAiModels,
  chat: (model, messages) => ({ method: 'POST', path: '/chat/completions', body: { model, messages } }),
};
