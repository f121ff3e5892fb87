// Workflows for bench/queue-limit-probe.ts: schedule many activities at once (or one after another) on a
// rate-limited activity task queue, so the probe can watch when the server dispatches them.
import type { Priority } from '@temporalio/common';
import { proxyActivities } from '@temporalio/workflow';
import type { ProbeActivities } from './queue-limit-probe';

export interface BurstInput {
  label: string;
  count: number;
  activityQueue: string;
  /** Failed attempts before each activity succeeds (each failure asks for a 100 ms retry delay). */
  failures?: number;
  priority?: Priority;
  /** false forbids eager dispatch; only matters when activityQueue is the workflow's own queue. */
  allowEagerDispatch?: boolean;
  /** Run the activities one after another instead of all at once. */
  sequential?: boolean;
}

export async function burst(input: BurstInput): Promise<number> {
  const { record } = proxyActivities<ProbeActivities>({
    taskQueue: input.activityQueue,
    startToCloseTimeout: '30s',
    // Long enough that nothing times out while queued behind a low limit.
    scheduleToCloseTimeout: '10m',
    retry: { initialInterval: '100ms', backoffCoefficient: 1, maximumAttempts: 10 },
    ...(input.priority ? { priority: input.priority } : {}),
    ...(input.allowEagerDispatch === undefined ? {} : { allowEagerDispatch: input.allowEagerDispatch }),
  });
  const failures = input.failures ?? 0;
  if (input.sequential) {
    for (let i = 0; i < input.count; i++) await record(input.label, i, failures);
    return input.count;
  }
  const done = await Promise.all(
    Array.from({ length: input.count }, (_, i) => record(input.label, i, failures)),
  );
  return done.length;
}
