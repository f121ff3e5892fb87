// POST /v1/chat/completions: the spec shows only its request (model, messages), so the answer is the
// OpenAI-style shape clients expect, echoing the last message.
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { requireModel, type ApiKeyRecord } from './api-keys';
import { parseBody, readJson, type V1Result } from './http';
import { CHAT_MODELS } from './models-route';
import type { SimulatorState } from './state';

const chatSchema = z.object({
  model: z.string(),
  messages: z.array(z.object({ role: z.string(), content: z.string() })).min(1),
});

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
  return {
    status: 200,
    body: {
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
  };
}
