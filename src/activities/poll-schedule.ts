import type { PollSchedule } from '../shared';

/**
 * Delay before the next status check after `attempt` (Temporal's activity attempt, 1-based; attempt 1 may
 * have been the wait for the first poll): interval × backoff^n, capped, then jittered by ±jitter.
 */
export function pollDelayMs(poll: PollSchedule, attempt: number, random: () => number = Math.random): number {
  const n = Math.max(0, attempt - 2);
  const base = Math.min(poll.capMs, poll.intervalMs * Math.pow(poll.backoff, n));
  const jittered = base * (1 + poll.jitter * (2 * random() - 1));
  return Math.max(100, Math.round(jittered));
}
