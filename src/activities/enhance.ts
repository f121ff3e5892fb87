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
import { ConnectionError, GatewayError, NotSentError, RateLimitError } from '../gateway/errors';
import { readRewrite, writeRewrite } from '../results/enhance-cache';
import { callOptions, countGatewayError } from './jobs';
import { allowedPath, type PathRoots } from './paths';
import { notSent, toFailure } from './to-failure';
import { recordHeartbeat } from './heartbeat';

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
 * Chat requests sent that got neither a rewrite nor a 429 (a 5xx, a timeout, a reset) before the row ends
 * `enhance_failed`: a rewrite is never worth a batch stuck on a chat model that is down. A 429, and an attempt
 * that sent nothing (this worker's Retry-After hold, a refused key, a refused connection), use none of them.
 */
export const ENHANCE_MAX_ATTEMPTS = 5;

/**
 * 429s a rewrite may get (each waited out as its Retry-After says) before the row ends `enhance_failed`: a
 * gateway that never has room for a chat call must not hold a row for ever.
 */
export const ENHANCE_MAX_RATE_LIMITED_ATTEMPTS = 30;

/**
 * Attempts of one rewrite in all, whatever they were (holds and refused connections included, which count
 * against neither bound above), before the row ends `enhance_failed`: what bounds a rewrite that never sends.
 */
export const ENHANCE_MAX_ATTEMPTS_IN_ALL = 60;

/**
 * What a rewrite's attempts used of its bounds so far: chat requests sent that failed (other than 429), and
 * 429s. Carried from attempt to attempt in the activity's heartbeat details, since Temporal's attempt number
 * counts every attempt, those that sent nothing included.
 */
export interface EnhanceCounts {
  failed: number;
  limited: number;
}

/** The counts the last attempt left (none on the first, or from a worker of an earlier version). */
function countsSoFar(details: unknown): EnhanceCounts {
  const d = details as Partial<EnhanceCounts> | undefined;
  return {
    failed: typeof d?.failed === 'number' ? d.failed : 0,
    limited: typeof d?.limited === 'number' ? d.limited : 0,
  };
}

/**
 * Records the counts in the attempt's heartbeat on the server, waited for, so the next attempt reads them. If
 * that fails the next attempt counts from older figures: bounded still, by ENHANCE_MAX_ATTEMPTS_IN_ALL.
 */
async function keepCounts(ctx: Context, counts: EnhanceCounts): Promise<void> {
  try {
    await recordHeartbeat(ctx, counts);
  } catch (err) {
    ctx.log.warn("could not record the rewrite's attempts; the next attempt counts from the last ones kept", {
      error: String(err),
    });
  }
}

/** Whether a chat call that failed was sent: not refused a connection (a hold sends nothing either). */
const wentOut = (err: unknown) =>
  err instanceof GatewayError && !(err instanceof ConnectionError && err.beforeSending);

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
      const options = callOptions(gateway.timeoutMs, input.unblockedAt);
      const { attempt } = ctx.info;
      const counts = countsSoFar(ctx.info.heartbeatDetails);
      let answer;
      try {
        answer = await gateway.chat(enhance.model, rewriteMessages(enhance, prompt), options);
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        const requestId = err instanceof GatewayError ? err.requestId : undefined;
        const giveUp = (why: string) =>
          enhanceFailed(`${why}; last: ${message}`, requestId ? { requestId } : {});
        if (err instanceof NotSentError) {
          if (attempt >= ENHANCE_MAX_ATTEMPTS_IN_ALL)
            throw giveUp(`the prompt's rewrite could not be sent in ${attempt} attempts`);
          // Nothing was sent: the counts stay as the last attempt left them (in the heartbeat details).
          await keepCounts(ctx, counts);
          throw notSent(err);
        }
        countGatewayError(err, 'chat', gateway);
        // A refusal (a refused key pauses the batch, a 4xx ends the row) goes to the workflow as it is.
        const failure = toFailure(err, 'enhancePrompt');
        if (failure.nonRetryable) throw failure;
        if (err instanceof RateLimitError) counts.limited += 1;
        else if (wentOut(err)) counts.failed += 1;
        if (counts.limited >= ENHANCE_MAX_RATE_LIMITED_ATTEMPTS)
          throw giveUp(`the gateway answered 429 to the prompt's rewrite ${counts.limited} times`);
        if (counts.failed >= ENHANCE_MAX_ATTEMPTS)
          throw giveUp(`the prompt's rewrite failed ${counts.failed} times`);
        if (attempt >= ENHANCE_MAX_ATTEMPTS_IN_ALL)
          throw giveUp(`the prompt's rewrite got no answer in ${attempt} attempts`);
        await keepCounts(ctx, counts);
        throw failure;
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
