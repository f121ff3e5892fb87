// Reading a chat completion's answer. The spec shows the request of POST /v1/chat/completions (model,
// messages) and not its answer, so this reads the OpenAI shape the gateway claims compatibility with:
// `choices[0].message.content`, a non-empty string. Anything else is a problem with that answer, said in
// words a user can act on; never an empty prompt passed on to a paid video request.
import type { ChatUsage } from '../contract/enhance';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export type ChatAnswer = { content: string; usage?: ChatUsage } | { problem: string };

const MAX_SHOWN = 200;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);

/** The answer's `usage`, when it has one with numbers in it. */
function usageOf(json: Record<string, unknown>): ChatUsage | undefined {
  const u = json.usage;
  if (!isRecord(u)) return undefined;
  const usage: ChatUsage = {};
  const promptTokens = count(u.prompt_tokens);
  const completionTokens = count(u.completion_tokens);
  const totalTokens = count(u.total_tokens) ?? (promptTokens ?? 0) + (completionTokens ?? 0);
  if (promptTokens !== undefined) usage.promptTokens = promptTokens;
  if (completionTokens !== undefined) usage.completionTokens = completionTokens;
  if (totalTokens) usage.totalTokens = totalTokens;
  return Object.keys(usage).length ? usage : undefined;
}

/** The text at `choices[0].message.content`, or what is wrong with the answer instead. */
export function readChatAnswer(json: unknown): ChatAnswer {
  if (!isRecord(json)) return { problem: 'the chat answer is not a JSON object' };
  const choices = json.choices;
  if (!Array.isArray(choices) || choices.length === 0)
    return { problem: 'the chat answer has no choices[0]' };
  const first: unknown = choices[0];
  const message = isRecord(first) ? first.message : undefined;
  if (!isRecord(message)) return { problem: 'the chat answer has no choices[0].message' };
  const { content } = message;
  if (content === undefined || content === null)
    return {
      problem:
        'the chat answer has no choices[0].message.content' +
        (typeof message.refusal === 'string' ? ` (refusal: ${message.refusal.slice(0, MAX_SHOWN)})` : ''),
    };
  if (typeof content !== 'string')
    return { problem: "the chat answer's choices[0].message.content is not text" };
  const text = content.trim();
  if (!text) return { problem: "the chat answer's choices[0].message.content is empty" };
  const usage = usageOf(json);
  return { content: text, ...(usage ? { usage } : {}) };
}
