// The Model Gateway's dialect (the spec vidbatch was built on): POST /videos/generations with an
// Idempotency-Key, GET /videos/generations/{id}, the video at `data[0].url`, errors as
// `{ error: { code, message } }`, GET /models and POST /chat/completions. The base URL ends in /v1.
import { z } from 'zod';
import { DEFAULT_MODEL } from '../../contract/rows';
import type { GenerationRequest, HttpCall, Problem, ProviderAdapter, ProviderJob } from '../provider';
import { canonicalStatus } from '../status';

const jobBody = z.looseObject({
  id: z.string().min(1),
  status: z.string().min(1),
  // A `completed` job without a usable URL is the caller's to judge (the row ends `no_video_url`), not a
  // transient error to retry forever.
  data: z.array(z.looseObject({ url: z.string().optional() })).optional(),
  error: z.looseObject({ code: z.string().optional(), message: z.string().optional() }).nullish(),
});

const errorBody = z.object({
  error: z.object({ code: z.string().optional(), message: z.string().optional() }),
});

const modelsBody = z.looseObject({ data: z.array(z.looseObject({ id: z.string() })) });

/** An OpenAI-style error body's code and message: shared by the dialects that answer errors this way. */
export function readOpenAiError(json: unknown): { code?: string; message?: string } | undefined {
  const parsed = errorBody.safeParse(json);
  if (!parsed.success) return undefined;
  const { code, message } = parsed.data.error;
  return { ...(code !== undefined ? { code } : {}), ...(message !== undefined ? { message } : {}) };
}

/** GET /models, read as OpenAI lists models: shared by the dialects that serve it. */
export const openAiModels: NonNullable<ProviderAdapter['models']> = {
  call: { method: 'GET', path: '/models' },
  read: (json) => {
    const parsed = modelsBody.safeParse(json);
    return parsed.success
      ? parsed.data.data.map((m) => m.id)
      : { problem: 'GET /models returned an unexpected body' };
  },
};

/** The URL check of a base URL that must end in /v1 (the OpenAI convention the gateway follows). */
export function endsInV1(baseUrl: string): string | undefined {
  return /^https?:\/\/[^/]+(\/.*)?\/v1$/.test(baseUrl) ? undefined : 'must be an http(s) URL ending in /v1';
}

function readJob(json: unknown): ProviderJob | Problem {
  const parsed = jobBody.safeParse(json);
  if (!parsed.success)
    return { problem: `job response has an unexpected shape: ${parsed.error.issues[0]?.message}` };
  const { id, status, data, error } = parsed.data;
  const raw = data?.[0]?.url;
  const url = raw && URL.canParse(raw) ? raw : undefined;
  return {
    id,
    status: canonicalStatus(status),
    rawStatus: status,
    ...(url ? { url } : {}),
    ...(error
      ? {
          error: {
            ...(error.code !== undefined ? { code: error.code } : {}),
            ...(error.message !== undefined ? { message: error.message } : {}),
          },
        }
      : {}),
  };
}

export const modelGateway: ProviderAdapter = {
  name: 'model-gateway',
  defaultModel: DEFAULT_MODEL,
  exampleBaseUrl: 'https://gateway.example.com/v1',
  checkBaseUrl: endsInV1,
  authorization: (key) => ({ authorization: `Bearer ${key}` }),
  submit: (request: GenerationRequest, idempotencyKey: string): HttpCall => ({
    method: 'POST',
    path: '/videos/generations',
    body: request,
    headers: { 'idempotency-key': idempotencyKey },
  }),
  check: (jobId) => ({ method: 'GET', path: `/videos/generations/${encodeURIComponent(jobId)}` }),
  readJob,
  readError: readOpenAiError,
  videoNeedsKey: false,
  models: openAiModels,
  chat: (model, messages) => ({ method: 'POST', path: '/chat/completions', body: { model, messages } }),
};
