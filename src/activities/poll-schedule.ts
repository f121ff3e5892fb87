import type { PollSchedule } from '../contract/types';

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
 * is checked again after a tenth of that, later the further it is past it, capped by the schedule's cap.
 */
export function adaptiveDelayMs(
  poll: PollSchedule,
  dueMs: number,
  ageMs: number,
  random: () => number = Math.random,
): number {
  const floor = Math.max(250, Math.min(2000, poll.intervalMs));
  const base = Math.min(poll.capMs, Math.max(floor, 0.1 * dueMs, 0.25 * (ageMs - dueMs)));
  return jitter(base, poll.jitter, random);
}

function jitter(base: number, fraction: number, random: () => number): number {
  return Math.max(100, Math.round(base * (1 + fraction * (2 * random() - 1))));
}
