import proto from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { billableActions } from '../../src/client/history-stats';

const { EventType } = proto.temporal.api.enums.v1;

describe('billableActions', () => {
  it('counts every activity attempt, the billable events, and the heartbeats each submit records', () => {
    const history = [
      { eventType: EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED },
      { eventType: EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED }, // not billable
      {
        eventType: EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        activityTaskScheduledEventAttributes: { activityType: { name: 'submitJob' } },
      },
      {
        eventType: EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
        activityTaskStartedEventAttributes: { attempt: 1 },
      },
      { eventType: EventType.EVENT_TYPE_TIMER_STARTED },
      {
        eventType: EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        activityTaskScheduledEventAttributes: { activityType: { name: 'pollJob' } },
      },
      // The status check's third attempt: its two earlier attempts were actions too.
      {
        eventType: EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
        activityTaskStartedEventAttributes: { attempt: 3 },
      },
    ];
    // start 1 + submit attempt 1 + its 2 heartbeats + timer 1 + poll attempts 3
    expect(billableActions(history)).toBe(8);
  });
});
