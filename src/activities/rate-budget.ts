// The rate-budget learner's one activity: set the gateway queue's server-side rate limit
// (UpdateTaskQueueConfig, Temporal server 1.29+). It uses the worker's own client, so it needs no settings.
import { Context } from '@temporalio/activity';
import proto from '@temporalio/proto';

const ACTIVITY = proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY;

export interface ApplyQueueLimitInput {
  gatewayQueue: string;
  /** Requests/second for the whole queue (all workers); 0 pauses dispatch. */
  rps: number;
  /** Shown by `temporal task-queue config get` and in describeTaskQueue. */
  reason: string;
}

export function createRateBudgetActivities() {
  return {
    async applyQueueLimit({ gatewayQueue, rps, reason }: ApplyQueueLimitInput): Promise<void> {
      const { client, info } = Context.current();
      await client.workflowService.updateTaskQueueConfig({
        namespace: info.workflowNamespace,
        identity: client.options.identity,
        taskQueue: gatewayQueue,
        taskQueueType: ACTIVITY,
        updateQueueRateLimit: { rateLimit: { requestsPerSecond: rps }, reason: reason.slice(0, 200) },
      });
    },
  };
}

export type RateBudgetActivities = ReturnType<typeof createRateBudgetActivities>;
