// When to check a job. The attempts of pollJob are the checks; each unfinished one sets the delay before the
// next: the configured schedule until the worker has learned the gateway's latency, then the learned one.
import type { PollSchedule } from '../contract/batch-options';

/**
 * Delay before the next status check after `attempt` (Temporal's activity attempt, 1-based; attempt 1 may
 * have been the wait for the first poll): interval × backoff^n, capped, then jittered by ±jitter.
 * This is the schedule used until the worker has learned the gateway's latency (or with adaptive polling off).
 */
export function pollDelayMs(poll: PollSchedule, attempt: number, random: () => number = Math.random): number {
  const n = Math.max(0, attempt - 2);
  const base = Math.min(poll.capMs, poll.intervalMs * Math.pow(poll.backoff, n));
  return jitter(base, poll.jitter, random);
}

/**
 * Once the worker knows `dueMs` (the age by which 90% of jobs have finished): a job still running at `ageMs`
 * is checked again after a tenth of that, later the further it is past it, capped by the schedule's cap. A job
 * found running before that age (checked early to explore, or before the latency was known) is next checked
 * at it: a tenth of it later, most such jobs would still be running.
 */
export function adaptiveDelayMs(
  poll: PollSchedule,
  dueMs: number,
  ageMs: number,
  random: () => number = Math.random,
): number {
  const floor = Math.max(250, Math.min(2000, poll.intervalMs));
  const base = Math.min(poll.capMs, Math.max(floor, 0.1 * dueMs, 0.25 * (ageMs - dueMs), dueMs - ageMs));
  return jitter(base, poll.jitter, random);
}

function jitter(base: number, fraction: number, random: () => number): number {
  return Math.max(100, Math.round(base * (1 + fraction * (2 * random() - 1))));
}

/** What the worker has learned of job latency (see latency.ts). */
export interface LatencyEstimate {
  dueAge(): number | undefined;
  firstCheckAge(jobId: string): number | undefined;
}

/**
 * One attempt of pollJob for a job `ageMs` old: `waitMs` when it is not due for a check yet (the first check
 * comes at the learned first-check age, or `firstPollMs` until that is known); otherwise check now, and
 * `retryDelayMs` is the wait before the next check should the job be unfinished. `firstCheckDue`: the caller
 * already waited for the first check (a workflow timer), so it is due whatever the estimate says now.
 */
export function nextCheck(
  poll: PollSchedule,
  attempt: number,
  jobId: string,
  ageMs: number,
  latency: LatencyEstimate,
  { random = Math.random, firstCheckDue = false }: { random?: () => number; firstCheckDue?: boolean } = {},
): { waitMs: number } | { retryDelayMs: number } {
  const adaptive = poll.adaptive !== false;
  const dueMs = adaptive ? latency.dueAge() : undefined;
  const untilFirstCheck = ((adaptive ? latency.firstCheckAge(jobId) : undefined) ?? poll.firstPollMs) - ageMs;
  if (untilFirstCheck > 0 && !firstCheckDue) return { waitMs: untilFirstCheck };
  return {
    retryDelayMs:
      dueMs === undefined ? pollDelayMs(poll, attempt, random) : adaptiveDelayMs(poll, dueMs, ageMs, random),
  };
}
