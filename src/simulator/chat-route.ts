// POST /v1/chat/completions: the spec shows only its request (model, messages), so the answer is the
// OpenAI-style shape clients expect. The reply is a deterministic rewrite of the last message (derived from
// it alone), so tests can assert on the text a video was asked with; chat faults break it on purpose.
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { requireModel, type ApiKeyRecord } from './api-keys';
import { bump } from './counters';
import { HttpError, parseBody, readJson, type V1Result } from './http';
import { hasWord } from './job-faults';
import { CHAT_MODELS } from './models-route';
import { tooMany } from './rate-limits';
import type { SimulatorState } from './state';

const chatSchema = z.object({
  model: z.string(),
  messages: z.array(z.object({ role: z.string(), content: z.string() })).min(1),
});

/** What the simulator answers for `text`: the text, with camera, light and motion added; nothing else. */
export function simulatedRewrite(text: string): string {
  return `${text.trim().replace(/[.\s]+$/, '')}, cinematic wide shot, soft golden-hour light, slow dolly-in`;
}

/** The Retry-After of a chat 429 (at least `retryAfterMinSeconds`). */
const CHAT_RETRY_AFTER_MS = 1000;

/** The chat faults for this text: thrown (429, 500), or the kind of broken answer to give. */
function chatFault(state: SimulatorState, text: string): 'empty' | 'missing' | undefined {
  const f = state.faults;
  const refuse429 = hasWord(text, f.chat429Words) && !state.chatRefusedOnce.has(text);
  if (refuse429 || state.roll('chatError429')) {
    if (refuse429) state.chatRefusedOnce.add(text);
    throw tooMany(state, 'chat', 'rate_limited', 'Rate limit exceeded.', CHAT_RETRY_AFTER_MS);
  }
  if (hasWord(text, f.chat500Words) || state.roll('chatError500'))
    throw new HttpError(500, 'internal_error', 'The chat model failed to answer.');
  if (hasWord(text, f.chatEmptyWords) || state.roll('chatEmpty')) return 'empty';
  if (hasWord(text, f.chatMissingWords) || state.roll('chatMissing')) return 'missing';
  return undefined;
}

/** POST /v1/chat/completions; undefined for any other request. */
export async function chatRoute(
  req: IncomingMessage,
  path: string,
  key: ApiKeyRecord,
  state: SimulatorState,
): Promise<V1Result | undefined> {
  if (req.method !== 'POST' || path !== '/v1/chat/completions') return undefined;
  const body = parseBody(chatSchema, await readJson(req));
  requireModel(key, body.model, CHAT_MODELS);
  const last = body.messages[body.messages.length - 1]?.content ?? '';
  const fault = chatFault(state, last);
  bump(state.stats.chatCalls, body.model);
  if (fault) bump(state.stats.chatBadAnswers, fault);
  const content = fault === 'empty' ? '' : simulatedRewrite(last);
  const words = (t: string) => t.split(/\s+/).filter(Boolean).length;
  const promptTokens = body.messages.reduce((n, m) => n + words(m.content), 0);
  return {
    status: 200,
    body: {
      id: `chatcmpl-${Object.values(state.stats.chatCalls).reduce((a, b) => a + b, 0)}-${Date.now()}`,
      object: 'chat.completion',
      created: Math.floor(state.now() / 1000),
      model: body.model,
      choices: [
        {
          index: 0,
          message: fault === 'missing' ? { role: 'assistant' } : { role: 'assistant', content },
          finish_reason: 'stop',
        },
      ],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: words(content),
        total_tokens: promptTokens + words(content),
      },
    },
  };
}
