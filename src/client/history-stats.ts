// What a batch costs in Temporal history: events per prompt, the largest run, estimated billable actions.
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { Activities } from '../activities';

export interface HistoryStats {
  batchRuns: number;
  batchEvents: number;
  /** The largest single run's history (the batch's or a prompt's), in events. */
  largestRunEvents: number;
  prompts: number;
  promptEvents: number;
  /** (batch events + prompt events) / prompts: what one row costs in history. */
  eventsPerPrompt: number;
  /** Estimated Temporal Cloud actions (workflow and activity starts, every activity retry, timers, signals, upserts, updates, submit heartbeats) per prompt. */
  actionsPerPrompt: number;
}

const BILLABLE = new Set([
  'EVENT_TYPE_WORKFLOW_EXECUTION_STARTED',
  'EVENT_TYPE_TIMER_STARTED',
  'EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED',
  'EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED',
  'EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
  'EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED',
  'EVENT_TYPE_MARKER_RECORDED',
]);

/**
 * Heartbeats are actions but not events. A submit that made a job records two on the server before it ends
 * (`sending` before the POST, the job id after it); that is counted for each submit activity in the history.
 * The SDK's throttled beats of a POST or download that takes over 5 s are not counted.
 */
const HEARTBEATS_PER_SUBMIT = 2;
const SUBMIT_ACTIVITY: keyof Activities = 'submitJob';

/** Actions in one history: each activity attempt counts (polls by retry are actions), as do the events above. */
export function billableActions(events: proto.temporal.api.history.v1.IHistoryEvent[]): number {
  let actions = 0;
  for (const event of events) {
    const type = proto.temporal.api.enums.v1.EventType[event.eventType ?? 0];
    if (type === 'EVENT_TYPE_ACTIVITY_TASK_STARTED')
      actions += event.activityTaskStartedEventAttributes?.attempt ?? 1;
    else if (type && BILLABLE.has(type)) actions += 1;
    if (
      type === 'EVENT_TYPE_ACTIVITY_TASK_SCHEDULED' &&
      event.activityTaskScheduledEventAttributes?.activityType?.name === SUBMIT_ACTIVITY
    )
      actions += HEARTBEATS_PER_SUBMIT;
  }
  return actions;
}

/** Counts history events of every run of the batch and of its prompt workflows (one fetch each: slow for huge batches). */
export async function historyStats(client: Client, batchId: string): Promise<HistoryStats> {
  const stats: HistoryStats = {
    batchRuns: 0,
    batchEvents: 0,
    largestRunEvents: 0,
    prompts: 0,
    promptEvents: 0,
    eventsPerPrompt: 0,
    actionsPerPrompt: 0,
  };
  let actions = 0;
  for await (const wf of client.workflow.list({ query: `BatchId = '${batchId}'` })) {
    const history = (await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory()).events ?? [];
    const events = history.length;
    actions += billableActions(history);
    stats.largestRunEvents = Math.max(stats.largestRunEvents, events);
    if (wf.type === 'batchWorkflow') {
      stats.batchRuns += 1;
      stats.batchEvents += events;
    } else {
      stats.prompts += 1;
      stats.promptEvents += events;
    }
  }
  stats.eventsPerPrompt = stats.prompts ? (stats.batchEvents + stats.promptEvents) / stats.prompts : 0;
  stats.actionsPerPrompt = stats.prompts ? actions / stats.prompts : 0;
  return stats;
}
