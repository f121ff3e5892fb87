// stopJob: a job its row no longer waits for (the batch was cancelled, or its deadline passed with no late videos
// kept) is stopped at the provider where the provider can (its cancel call), so it bills no more. Checked first:
// a job that finished meanwhile brings its video home instead, and a cancel (OpenAI-Videos' DELETE) never
// deletes a video that was paid for. On the gateway queue, so a stop takes a token of the budget like a check.
import type { JobCheck, StopResult } from '../contract/jobs';
import type { GatewayClient } from '../gateway/client';
import { NotSentError } from '../gateway/errors';
import { callOptions, checkOnce, countGatewayError, type CheckInput } from './jobs';
import { notSent, toFailure } from './to-failure';

export function createStopActivities(gateway: GatewayClient) {
  return {
    async stopJob(input: CheckInput): Promise<StopResult> {
      let check: JobCheck | undefined;
      try {
        check = await checkOnce(gateway, input);
        if (check.state !== 'unfinished') return check;
        // Right after the check, never after a Retry-After hold: a job that completed during a hold would have
        // its paid video deleted by a cancel that is a DELETE. A hold now fails the attempt unsent, and the next
        // attempt checks again first.
        const stop = await gateway.cancel(input.jobId, check.rawStatus, {
          ...callOptions(gateway.timeoutMs, input.unblockedAt),
          maxWaitMs: 0,
        });
        if (stop === 'stopped') return { state: 'stopped' };
        return stop === 'requested' ? { state: 'stop_requested' } : check;
      } catch (err) {
        if (err instanceof NotSentError) throw notSent(err);
        countGatewayError(err, check ? 'cancel' : 'check', gateway);
        // A refused cancel may mean the job finished since the check (fal answers 400 ALREADY_COMPLETED): the
        // next attempt checks it first again.
        throw toFailure(err, 'stopJob');
      }
    },
  };
}
