// The gateway activities: submitJob (one POST per attempt, the same Idempotency-Key on every retry) and pollJob
// (at most one status check per attempt; "not finished" is a retryable failure timed by the poll schedule).
// Both wait for the worker's request pacer only as long as their attempt can still finish.
import { Context } from '@temporalio/activity';
import type { PollOutcome, PollSchedule, PromptRow, SubmitResult } from '../contract/types';
import type { GatewayClient } from '../gateway/client';
import { PacerBusyError } from '../gateway/errors';
import { LatencyTracker } from './latency';
import { nextCheck } from './poll-schedule';
import { jobNotFinished, pacerBusy, toFailure } from './to-failure';

export interface PollInput {
  jobId: string;
  submittedAt: number;
  poll: PollSchedule;
}

/** The same key on every retry of a row, so a gateway that honours it never creates a second job. */
export function idempotencyKey(batchId: string, rowId: string): string {
  return `vidbatch:${batchId}:${rowId}`;
}

/** vidbatch's own counters, next to the Temporal runtime's metrics (exported with `--metrics`). */
function count(name: string, tags: Record<string, string> = {}): void {
  Context.current().metricMeter.createCounter(name).add(1, tags);
}

/** A gateway call waits for the worker's pacer only as long as the attempt can still finish within its timeout. */
function pacerBudgetMs(gatewayTimeoutMs: number): number {
  return Math.max(0, Context.current().info.startToCloseTimeoutMs - gatewayTimeoutMs - 2000);
}

function countGatewayError(err: unknown, operation: string, gateway: GatewayClient): void {
  const kind = err instanceof Error ? err.name : 'Error';
  count('vidbatch_gateway_errors', { operation, class: kind });
  if (kind === 'RateLimitError') {
    count('vidbatch_rate_limited', { operation });
    const { rate, ceiling, queued } = gateway.pacer.snapshot();
    Context.current().log.info('429 from the gateway; pacing this worker', {
      operation,
      rate: Number(rate.toFixed(2)),
      ceiling: ceiling === undefined ? null : Number(ceiling.toFixed(2)),
      queued,
    });
  }
}

export function createJobActivities(gateway: GatewayClient) {
  const latency = new LatencyTracker();
  // Attempts spent waiting for the pacer, per idempotency key, so a row's `attempts` counts real submissions.
  const pacedSubmits = new Map<string, number>();

  return {
    async submitJob({ batchId, row }: { batchId: string; row: PromptRow }): Promise<SubmitResult> {
      const { attempt } = Context.current().info;
      const key = idempotencyKey(batchId, row.id);
      try {
        const job = await gateway.submit(
          { model: row.model, input: row.input, parameters: row.parameters },
          key,
          pacerBudgetMs(gateway.timeoutMs),
        );
        count('vidbatch_jobs_submitted');
        const paced = pacedSubmits.get(key) ?? 0;
        pacedSubmits.delete(key);
        return { jobId: job.id, submittedAt: Date.now(), attempts: Math.max(1, attempt - paced) };
      } catch (err) {
        if (err instanceof PacerBusyError) {
          if (pacedSubmits.size > 10_000) pacedSubmits.clear();
          pacedSubmits.set(key, (pacedSubmits.get(key) ?? 0) + 1);
          throw pacerBusy(err);
        }
        countGatewayError(err, 'submit', gateway);
        throw toFailure(err, 'submitJob');
      }
    },

    /**
     * At most one status check per attempt; "not finished" is a retryable failure whose nextRetryDelay is the
     * poll schedule: the learned latency once known (see latency.ts), the configured schedule until then.
     */
    async pollJob({ jobId, submittedAt, poll }: PollInput): Promise<PollOutcome> {
      const { attempt } = Context.current().info;
      const timing = nextCheck(poll, attempt, jobId, Date.now() - submittedAt, latency);
      if ('waitMs' in timing) {
        throw jobNotFinished(
          `job ${jobId} submitted; next status check in ${Math.ceil(timing.waitMs / 1000)} s`,
          timing.waitMs,
        );
      }
      let job;
      try {
        job = await gateway.getJob(jobId, pacerBudgetMs(gateway.timeoutMs));
      } catch (err) {
        if (err instanceof PacerBusyError) throw pacerBusy(err);
        countGatewayError(err, 'status', gateway);
        throw toFailure(err, 'pollJob', timing.retryDelayMs);
      }
      const checkedAge = Date.now() - submittedAt;
      latency.checked(jobId, checkedAge, job.status === 'completed' || job.status === 'failed');
      if (job.status === 'completed') {
        count('vidbatch_jobs_finished', { status: 'succeeded', code: '' });
        return { status: 'succeeded', url: job.url, polls: attempt };
      }
      if (job.status === 'failed') {
        count('vidbatch_jobs_finished', { status: 'failed', code: job.error?.code ?? 'job_failed' });
        return {
          status: 'failed',
          errorCode: job.error?.code ?? 'job_failed',
          errorMessage: job.error?.message || `the gateway reported status "${job.rawStatus}"`,
          polls: attempt,
        };
      }
      const unknown = job.status === 'unknown';
      if (unknown)
        Context.current().log.warn('undocumented job status, treated as not finished', {
          jobId,
          status: job.rawStatus,
        });
      throw jobNotFinished(
        `job ${jobId} is ${job.rawStatus}${unknown ? ' (undocumented status, treated as not finished)' : ''}`,
        timing.retryDelayMs,
      );
    },
  };
}
