// Prompt enhancement: a row's prompt rewritten once through the gateway's chat completions before its video is
// paid for (docs/enhance-prompts.md). Imported by workflow code: no Node built-ins.

/** The batch's enhancement settings, resolved once by the client (flags, else the batch's own, else defaults). */
export interface EnhanceOptions {
  /** The chat model the rewrite is asked of. */
  model: string;
  /** The system prompt sent before the row's prompt (the text itself, not its file). */
  instructions: string;
}

/** Code of a row whose rewrite failed (no usable answer, or the gateway refused the chat call); no job is made. */
export const ENHANCE_FAILED_CODE = 'enhance_failed';

/**
 * The default chat model: the one the simulator serves. A real gateway names its own chat models (GET
 * /v1/models); users set `--enhance-model` to one of them.
 */
export const DEFAULT_ENHANCE_MODEL = 'modelfamily-chat-1.0';

/**
 * The default instructions: detail the video model can use, nothing it was not asked for. The rewrite is shown
 * and kept, so it must read as the user's own prompt, not as a chat answer around it.
 */
export const DEFAULT_ENHANCE_INSTRUCTIONS = [
  'You rewrite prompts for a text-to-video model.',
  'Add concrete camera, lighting and motion detail (shot size, camera movement, light quality, how the subjects move).',
  'Keep every subject, object, count, place, style and fact of the original prompt; do not invent new subjects, text, brands or requirements.',
  'Keep it one paragraph, under 120 words, in the language of the original.',
  'Answer with the rewritten prompt only: no preamble, no quotes, no notes.',
].join('\n');

/** What a rewrite cost, as the chat answer's `usage` said (absent when it said nothing). */
export interface ChatUsage {
  promptTokens?: number;
  completionTokens?: number;
  totalTokens?: number;
}
