// Activities, built by a factory that receives their dependencies (gateway client, clock, output root), so
// tests and the worker wire them the same way.
import { resolve } from 'node:path';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { ApplicationFailureCategory } from '@temporalio/common';
import { loadCsv } from '../input/csv';
import { downloadVerified } from '../results/download';
import { DownloadError } from '../errors';
import { PacerBusyError } from '../gateway/errors';
import type { GatewayClient } from '../gateway/client';
import { appendResults, manifestPath } from '../results/manifest';
import { FailureType } from '../contract/failures';
import type {
  DownloadedVideo,
  PollOutcome,
  PollSchedule,
  PromptResult,
  PromptRow,
  SubmitResult,
} from '../contract/types';
import { toFailure } from './to-failure';
import { LatencyTracker } from './latency';
import { adaptiveDelayMs, pollDelayMs } from './poll-schedule';

export interface ActivityDeps {
  gateway: GatewayClient;
  /** Root under which each batch gets `<outRoot>/<batchId>/`. */
  outRoot: string;
  now?: () => number;
  random?: () => number;
  /** Shared by the worker's activities; default: a new one. */
  latency?: LatencyTracker;
}

export interface ReadRowsInput {
  csvPath: string;
  csvSha256: string;
  offset: number;
  limit: number;
}

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

/** The pacer is busy: come back when it said, without counting a failure (nothing was sent). */
function tryLater(err: PacerBusyError): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.PacerBusy,
    message: err.message,
    nextRetryDelay: err.retryAfterMs,
    category: ApplicationFailureCategory.BENIGN,
  });
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

export function createActivities(deps: ActivityDeps) {
  const now = deps.now ?? Date.now;
  const random = deps.random ?? Math.random;
  const latency = deps.latency ?? new LatencyTracker(now);
  // Attempts spent waiting for the pacer, per idempotency key, so a row's `attempts` counts real submissions.
  const pacedSubmits = new Map<string, number>();
  // The parsed CSV of the current batch; pages are cut from it instead of re-parsing per page.
  let csvCache: { key: string; rows: PromptRow[] } | undefined;

  return {
    async readRows({ csvPath, csvSha256, offset, limit }: ReadRowsInput): Promise<PromptRow[]> {
      const key = `${csvPath}\n${csvSha256}`;
      if (csvCache?.key !== key) {
        const parsed = await loadCsv(csvPath);
        if (parsed.sha256 !== csvSha256) {
          throw ApplicationFailure.create({
            type: FailureType.CsvChanged,
            message: `${csvPath} changed since the batch started (sha256 ${parsed.sha256.slice(0, 12)}, expected ${csvSha256.slice(0, 12)}); restore it to continue`,
          });
        }
        csvCache = { key, rows: parsed.rows };
      }
      return csvCache.rows.slice(offset, offset + limit);
    },

    async submitJob({ batchId, row }: { batchId: string; row: PromptRow }): Promise<SubmitResult> {
      const { attempt } = Context.current().info;
      const key = idempotencyKey(batchId, row.id);
      try {
        const job = await deps.gateway.submit(
          { model: row.model, input: row.input, parameters: row.parameters },
          key,
          pacerBudgetMs(deps.gateway.timeoutMs),
        );
        count('vidbatch_jobs_submitted');
        const paced = pacedSubmits.get(key) ?? 0;
        pacedSubmits.delete(key);
        return { jobId: job.id, submittedAt: now(), attempts: Math.max(1, attempt - paced) };
      } catch (err) {
        if (err instanceof PacerBusyError) {
          if (pacedSubmits.size > 10_000) pacedSubmits.clear();
          pacedSubmits.set(key, (pacedSubmits.get(key) ?? 0) + 1);
          throw tryLater(err);
        }
        countGatewayError(err, 'submit', deps.gateway);
        throw toFailure(err, { rateLimitToWorkflow: true });
      }
    },

    /**
     * At most one status check per attempt; "not finished" is a retryable failure whose nextRetryDelay is the
     * poll schedule: the learned latency once known (see latency.ts), the configured schedule until then.
     */
    async pollJob({ jobId, submittedAt, poll }: PollInput): Promise<PollOutcome> {
      const { attempt } = Context.current().info;
      const adaptive = poll.adaptive !== false;
      const dueMs = adaptive ? latency.dueAge() : undefined;
      const age = now() - submittedAt;
      const untilFirstPoll =
        ((adaptive ? latency.firstCheckAge(jobId) : undefined) ?? poll.firstPollMs) - age;
      if (untilFirstPoll > 0) {
        throw ApplicationFailure.create({
          type: FailureType.JobNotFinished,
          message: `job ${jobId} submitted; next status check in ${Math.ceil(untilFirstPoll / 1000)} s`,
          nextRetryDelay: untilFirstPoll,
          category: ApplicationFailureCategory.BENIGN,
        });
      }
      const retryDelayMs =
        dueMs === undefined ? pollDelayMs(poll, attempt, random) : adaptiveDelayMs(poll, dueMs, age, random);
      let job;
      try {
        job = await deps.gateway.getJob(jobId, pacerBudgetMs(deps.gateway.timeoutMs));
      } catch (err) {
        if (err instanceof PacerBusyError) throw tryLater(err);
        countGatewayError(err, 'status', deps.gateway);
        throw toFailure(err, { rateLimitToWorkflow: false, retryDelayMs });
      }
      const checkedAge = now() - submittedAt;
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
      throw ApplicationFailure.create({
        type: FailureType.JobNotFinished,
        message: `job ${jobId} is ${job.rawStatus}${unknown ? ' (undocumented status, treated as not finished)' : ''}`,
        nextRetryDelay: retryDelayMs,
        // An unfinished job is the normal case of polling by retries: no warning logs, no failure metrics.
        category: ApplicationFailureCategory.BENIGN,
      });
    },

    async downloadVideo({
      url,
      dir,
      name,
    }: {
      url: string;
      dir: string;
      name: string;
    }): Promise<DownloadedVideo> {
      try {
        const { file, sha256, bytes } = await downloadVerified(url, resolve(dir), name);
        return { file, sha256, bytes };
      } catch (err) {
        if (err instanceof DownloadError) {
          throw ApplicationFailure.create({
            type: 'DownloadFailed',
            message: err.message,
            nonRetryable: !err.retryable,
          });
        }
        throw err;
      }
    },

    async recordResults({
      batchId,
      outDir,
      results,
    }: {
      batchId: string;
      outDir?: string;
      results: PromptResult[];
    }) {
      const dir = resolve(outDir ?? resolve(deps.outRoot, batchId));
      const written = await appendResults(dir, results);
      return { manifestPath: manifestPath(dir), written };
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
