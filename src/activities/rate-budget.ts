// The rate-budget learner's activities: set the gateway queue's server-side rate limit
// (UpdateTaskQueueConfig, Temporal server 1.29+), and read it back (DescribeTaskQueue with reportConfig), which
// a fresh learner is seeded from and each worker's watchdog checks. They use the worker's own client, so they
// need no settings.
import { Context } from '@temporalio/activity';
import type { WorkflowService } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { QueueLimit } from '../contract/limit-reason';

const ACTIVITY = proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY;
const NORMAL = proto.temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL;

export interface ApplyQueueLimitInput {
  gatewayQueue: string;
  /** Requests/second for the whole queue (all workers); 0 pauses dispatch. */
  rps: number;
  /** Shown by `temporal task-queue config get` and in describeTaskQueue. */
  reason: string;
}

/** The queue's limit as the server keeps it; rps null when none is set (a limit of 0 is a hold). */
export async function describeQueueLimit(
  service: WorkflowService,
  namespace: string | undefined,
  queue: string,
): Promise<QueueLimit> {
  const d = await service.describeTaskQueue({
    namespace,
    taskQueue: { name: queue, kind: NORMAL },
    taskQueueType: ACTIVITY,
    reportConfig: true,
  });
  const limit = d.config?.queueRateLimit;
  // proto3 leaves a 0 out: a rateLimit present without requestsPerSecond is a limit of 0. The server keeps a
  // float32: 3.6 comes back as 3.5999999; six significant digits give back what was written.
  const rps = limit?.rateLimit ? Number((limit.rateLimit.requestsPerSecond ?? 0).toPrecision(6)) : null;
  return { rps, reason: limit?.metadata?.reason ?? '' };
}

/** Sets the queue's limit (0 pauses it); the reason shows in `temporal task-queue config get`. */
export async function setQueueLimit(
  service: WorkflowService,
  namespace: string | undefined,
  identity: string | undefined,
  { gatewayQueue, rps, reason }: ApplyQueueLimitInput,
): Promise<void> {
  await service.updateTaskQueueConfig({
    namespace,
    identity,
    taskQueue: gatewayQueue,
    taskQueueType: ACTIVITY,
    updateQueueRateLimit: { rateLimit: { requestsPerSecond: rps }, reason: reason.slice(0, 200) },
  });
}

export function createRateBudgetActivities() {
  return {
    async applyQueueLimit(input: ApplyQueueLimitInput): Promise<void> {
      const { client, info } = Context.current();
      await setQueueLimit(client.workflowService, info.workflowNamespace, client.options.identity, input);
    },

    /** The gateway queue's limit and reason as the server keeps them, for a fresh learner to start from. */
    async readQueueLimit({ gatewayQueue }: { gatewayQueue: string }): Promise<QueueLimit> {
      const { client, info } = Context.current();
      return describeQueueLimit(client.workflowService, info.workflowNamespace, gatewayQueue);
    },
  };
}

export type RateBudgetActivities = ReturnType<typeof createRateBudgetActivities>;
