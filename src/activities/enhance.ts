// The enhancePrompt activity (on the gateway queue, so it takes its token of the shared rate budget): a row's
// prompt rewritten once through the gateway's chat completions. The output root's kept rewrite is read
// first; only without one is the gateway asked, and its answer kept before it is returned, so a retry, a
// re-run or another file never pays for the same rewrite again.
import { dirname, resolve } from 'node:path';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { ApplicationFailureCategory } from '@temporalio/common';
import { FailureType } from '../contract/failures';
import type { ChatUsage, EnhanceOptions } from '../contract/enhance';
import type { GatewayClient } from '../gateway/client';
import {
  AuthenticationError,
  GatewayError,
  KeyRefusedError,
  NotSentError,
  PermissionDeniedError,
  RateLimitError,
} from '../gateway/errors';
import { readRewrite, writeRewrite } from '../results/enhance-cache';
import { attemptWindow, countGatewayError } from './jobs';
import { allowedPath, type PathRoots } from './paths';
import { notSent, toFailure } from './to-failure';

export interface EnhanceInput {
  batchId: string;
  rowId: string;
  /** The row's prompt as written: what is rewritten. */
  prompt: string;
  enhance: EnhanceOptions;
  /** The batch's output folder (the kept rewrites are in its root); default `<outRoot>/<batchId>`. */
  outDir?: string;
  unblockedAt?: number;
}

export interface EnhanceResult {
  enhanced: string;
  /** Read from the output root's kept rewrites: no chat call was made. */
  cached: boolean;
  usage?: ChatUsage;
  requestId?: string;
}

/**
 * Attempts that a transient error (5xx, a reset, a timeout) may take before the row ends `enhance_failed`: a
 * rewrite is never worth a batch stuck on a chat model that is down. 429s and holds do not count.
 */
export const ENHANCE_MAX_ATTEMPTS = 5;

/**
 * Attempts a rewrite may spend on 429s (each waited out as its Retry-After says) before the row ends
 * `enhance_failed`: a gateway that never has room for a chat call must not hold a row for ever.
 */
export const ENHANCE_MAX_RATE_LIMITED_ATTEMPTS = 30;

/** The messages of a rewrite: the instructions, then the prompt as the user wrote it. */
export function rewriteMessages(enhance: EnhanceOptions, prompt: string) {
  return [
    { role: 'system' as const, content: enhance.instructions },
    { role: 'user' as const, content: prompt },
  ];
}

/** The row's rewrite failed for good: its message says why, in the gateway's words where it had any. */
export function enhanceFailed(message: string, details: { requestId?: string; chatCalls?: number }) {
  return ApplicationFailure.create({
    type: FailureType.EnhanceFailed,
    message,
    nonRetryable: true,
    details: [{ code: 'enhance_failed', ...details }],
    category: ApplicationFailureCategory.BENIGN,
  });
}

const keyRefused = (err: unknown) =>
  err instanceof KeyRefusedError ||
  err instanceof AuthenticationError ||
  err instanceof PermissionDeniedError;

export function createEnhanceActivities(gateway: GatewayClient, outRoot = 'out', roots?: PathRoots) {
  return {
    async enhancePrompt(input: EnhanceInput): Promise<EnhanceResult> {
      const { enhance, prompt, rowId } = input;
      const ctx = Context.current();
      const dir = await allowedPath(input.outDir ?? resolve(outRoot, input.batchId), 'out', roots);
      // Kept rewrites live beside the batch's folder: in its output root, or in the store its results are in.
      const root = dirname(dir);
      const kept = await readRewrite(root, enhance, prompt);
      if (kept) return { enhanced: kept.enhanced, cached: true };
      const { holdMs, sendBy } = attemptWindow(Date.now(), gateway.timeoutMs);
      let answer;
      try {
        answer = await gateway.chat(enhance.model, rewriteMessages(enhance, prompt), {
          maxWaitMs: holdMs,
          sendBy,
          ...(input.unblockedAt !== undefined ? { unblockedAt: input.unblockedAt } : {}),
        });
      } catch (err) {
        if (err instanceof NotSentError) throw notSent(err);
        countGatewayError(err, 'chat', gateway);
        const requestId = err instanceof GatewayError ? err.requestId : undefined;
        const limited = err instanceof RateLimitError;
        if (limited && ctx.info.attempt >= ENHANCE_MAX_RATE_LIMITED_ATTEMPTS)
          throw enhanceFailed(
            `the gateway answered 429 to the prompt's rewrite ${ctx.info.attempt} times; last: ${err.message}`,
            requestId ? { requestId } : {},
          );
        const transient = !limited && !keyRefused(err);
        if (transient && ctx.info.attempt >= ENHANCE_MAX_ATTEMPTS)
          throw enhanceFailed(
            `the prompt's rewrite failed ${ctx.info.attempt} times; last: ${err instanceof Error ? err.message : String(err)}`,
            requestId ? { requestId } : {},
          );
        throw toFailure(err, 'enhancePrompt');
      }
      const { requestId } = answer;
      if ('problem' in answer)
        throw enhanceFailed(
          `POST /chat/completions: ${answer.problem} (model ${enhance.model}); no video was asked for`,
          { ...(requestId ? { requestId } : {}), chatCalls: 1 },
        );
      try {
        await writeRewrite(root, enhance, {
          original: prompt,
          enhanced: answer.content,
          ...(answer.usage ? { usage: answer.usage } : {}),
          at: new Date().toISOString(),
          ...(requestId ? { requestId } : {}),
        });
      } catch (err) {
        // The rewrite is still this row's (it is in history); only a later run would pay for it again.
        ctx.log.warn('could not keep the rewrite in the output root', { rowId, error: String(err) });
      }
      return {
        enhanced: answer.content,
        cached: false,
        ...(answer.usage ? { usage: answer.usage } : {}),
        ...(requestId ? { requestId } : {}),
      };
    },
  };
}
