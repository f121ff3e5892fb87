// A row that ends while its job goes on (the batch was cancelled, or its deadline passed with no late videos
// kept) has that job stopped at the provider, where the provider can stop one (the batch's `stopJobs`): the
// stopJob activity checks it, and cancels it when it is still running. A job found finished brings its video
// home as the row's result; one the stop could not reach, or that the provider was only asked to stop (fal's
// CANCELLATION_REQUESTED for a running request: the app may finish it and bill), is said on the row to be one
// that may still bill, and is watched for a late video. A job another batch's row follows (it paid for the
// same request) is never stopped under it. Runs before the batch hears of the row's end, so the manifest line
// says what became of the job, and the ledger counts it.
import { CancellationScope, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { RETRY_POLICIES } from '../contract/failures';
import type { StopResult } from '../contract/jobs';
import type { JobFollowed } from '../contract/messages';
import type { JobStop, PromptInput, PromptResult } from '../contract/prompt';
import type { LateRun } from './late-video';
import { activityError } from './prompt-outcome';

/** Whether the row's job is to be stopped: its own (not another batch's), and given up on. */
export function stopsJob(input: PromptInput, result: PromptResult): boolean {
  if (!input.stopJobs || result.status !== 'failed' || !result.jobId || result.reusedFrom) return false;
  if (result.errorCode === 'cancelled') return true;
  // A late video kept is worth more than a stop: only a batch that keeps none stops its late jobs.
  return result.errorCode === 'deadline_exceeded' && !input.lateForMs;
}

/** The row's result once its job was stopped, found ended, or not reached (unchanged when not to be stopped). */
export async function stopAbandonedJob(
  run: LateRun,
  result: PromptResult,
  followers: readonly JobFollowed[] = [],
): Promise<PromptResult> {
  if (!stopsJob(run.input, result)) return result;
  const jobId = result.jobId!;
  const follower = followers.find((f) => f.jobId === jobId);
  if (follower)
    return withStop(
      result,
      'not_stopped',
      `${follower.batchId} row ${follower.rowId} follows it (the same request), so it was left to run for that row`,
    );
  // A cancelled prompt's own scope is cancelled: the stop runs outside it, bounded by its retry policy.
  return CancellationScope.nonCancellable(async () => {
    const { stopJob } = proxyActivities<Activities>({
      ...run.gateway,
      startToCloseTimeout: run.input.activityTimeoutMs,
      retry: RETRY_POLICIES.stopJob,
    });
    let stop: StopResult;
    try {
      stop = await stopJob.executeWithOptions({ summary: `stop job ${jobId}` }, [
        { jobId, unblockedAt: run.state.unblockedAt },
      ]);
    } catch (err) {
      const why = activityError(err)?.message ?? String(err);
      return withStop(
        result,
        'not_stopped',
        `stopping it failed (${why}), so it may still finish and be billed`,
      );
    }
    switch (stop.state) {
      case 'stopped':
        return withStop(result, 'stopped', 'it was stopped at the provider');
      case 'stop_requested':
        return withStop(
          result,
          'requested',
          'the provider was asked to stop it, but may still finish and bill it; a video that arrives is kept',
        );
      case 'succeeded':
        // Finished before the stop: paid for, so its video is kept and the row succeeds.
        return run.keep({ status: 'succeeded', url: stop.url, polls: result.polls + 1 });
      case 'failed':
        return withStop(
          result,
          'ended',
          `it had ended at the provider (${stop.errorCode}: ${stop.errorMessage})`,
        );
      case 'gone':
        return withStop(result, 'ended', 'the provider no longer knows it');
      default:
        // `unfinished`: the provider has no cancel; `no_url`: it completed without a video to fetch.
        return result;
    }
  });
}

function withStop(result: PromptResult, jobStop: JobStop, said: string): PromptResult {
  const before = (result.errorMessage ?? '').replace(/ and may still finish at the gateway$/, '');
  return { ...result, jobStop, errorMessage: `${before}; ${said}` };
}
