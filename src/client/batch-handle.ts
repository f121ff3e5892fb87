// A batch's workflow from the client side, once it exists: its handle, its progress, following it, cancelling it,
// and whether this version's workers may run it.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client, WorkflowExecutionDescription, WorkflowHandle } from '@temporalio/client';
import proto from '@temporalio/proto';
import { progressQuery } from '../contract/messages';
import type { BatchResult } from '../contract/batch';
import type { BatchProgress } from '../contract/progress';
import { OtherVersionBatchError } from '../errors';
import { batchWorkflow } from '../workflows';
import type { Session } from './session';
import { queueBase } from './task-queue';

/**
 * Throws OtherVersionBatchError when the batch is open on another task queue than `taskQueue` (this version's):
 * a 0.x batch, which this version's workers never pick up and must not attach to or start again.
 */
export function checkSameVersion(description: WorkflowExecutionDescription, taskQueue: string): void {
  if (description.status.name === 'RUNNING' && queueBase(description.taskQueue) !== queueBase(taskQueue))
    throw new OtherVersionBatchError(description.workflowId, description.taskQueue, taskQueue);
}

/** How long `cancel` waits for a batch no worker serves to run its cancellation before terminating it. */
export const UNSERVED_CANCEL_WAIT_MS = 10_000;

/**
 * Cancels a batch, and always ends it. A batch no worker of this version serves (a 0.x batch, or one whose
 * process ended) cannot run its cancellation: it gets a bounded wait in case a worker comes, then is terminated.
 * Whether a worker serves it is read in the batch's history (a workflow task completed since the cancel request),
 * not in the queue's pollers: the server lists a worker that was killed as a poller for minutes.
 * Its jobs are in the jobs journal, so running its file again checks them instead of paying again.
 */
export async function cancelBatch(
  session: Session,
  batchId: string,
  waitMs = UNSERVED_CANCEL_WAIT_MS,
): Promise<'cancelled' | 'terminated-old' | 'terminated-unserved'> {
  const handle = batchHandle(session.client, batchId);
  const description = await handle.describe();
  const running = description.status.name === 'RUNNING';
  if (running && queueBase(description.taskQueue) !== queueBase(session.taskQueue)) {
    await handle.terminate(
      `cancelled from vidbatch 1.x: no worker of this version runs task queue "${description.taskQueue}"`,
    );
    return 'terminated-old';
  }
  await handle.cancel();
  if (!running) return 'cancelled';
  const deadline = Date.now() + waitMs;
  for (;;) {
    if (await ranSinceCancelRequest(session, batchId, description.runId)) return 'cancelled';
    if (Date.now() >= deadline) break;
    await sleep(Math.min(500, deadline - Date.now()));
  }
  await handle
    .terminate(`cancelled: no worker polls task queue "${description.taskQueue}" to run the cancellation`)
    .catch(() => undefined); // closed meanwhile
  return 'terminated-unserved';
}

const EventType = proto.temporal.api.enums.v1.EventType;
/** The events that close a run. */
const CLOSED = new Set<proto.temporal.api.enums.v1.EventType | null | undefined>([
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
  EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
]);

/**
 * Whether the run was closed, or a worker completed a workflow task of it, after its latest cancel request: read
 * from the end of its history, so only the events since the request are read.
 */
async function ranSinceCancelRequest(session: Session, workflowId: string, runId: string): Promise<boolean> {
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await session.client.workflowService.getWorkflowExecutionHistoryReverse({
      namespace: session.namespace,
      execution: { workflowId, runId },
      maximumPageSize: 100,
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    for (const event of page.history?.events ?? []) {
      const type = event.eventType;
      if (type === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED || CLOSED.has(type)) return true;
      if (type === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED) return false;
    }
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
  return false;
}

export function batchHandle(client: Client, batchId: string): WorkflowHandle<typeof batchWorkflow> {
  return client.workflow.getHandle<typeof batchWorkflow>(batchId);
}

/**
 * How long a progress query waits for its answer. A served batch answers in well under a second; one no worker
 * serves (the process that ran it was killed) would hold the query until the server gives up, a minute later.
 */
export const PROGRESS_QUERY_MS = 10_000;

export async function getProgress(
  handle: WorkflowHandle,
  timeoutMs = PROGRESS_QUERY_MS,
): Promise<BatchProgress | undefined> {
  try {
    return await handle.client.withDeadline(Date.now() + timeoutMs, () => handle.query(progressQuery));
  } catch {
    return undefined; // between runs (continue-as-new), no worker yet, or none answered in time
  }
}

/** Waits for the batch to finish, reporting progress; stops following (the batch keeps running) on abort. */
export async function followBatch(
  handle: WorkflowHandle<typeof batchWorkflow>,
  onProgress: (p: BatchProgress) => void,
  signal?: AbortSignal,
  intervalMs = 1000,
): Promise<BatchResult | undefined> {
  let done = false;
  // The result long-poll must be cancelled when we stop following, or it outlives the closed connection.
  const stopFollowing = new AbortController();
  signal?.addEventListener('abort', () => stopFollowing.abort(), { once: true });
  const result = handle.client
    .withAbortSignal(stopFollowing.signal, () => handle.result())
    .finally(() => (done = true));
  // Handled here too: when a progress read throws first (the server went away), this rejection must not be
  // left unhandled, which would end the process with a stack trace instead of the caller's message.
  result.catch(() => undefined);
  while (!done && !signal?.aborted) {
    const p = await getProgress(handle);
    if (p) onProgress(p);
    await Promise.race([
      sleep(intervalMs, undefined, { signal }).catch(() => undefined),
      result.catch(() => undefined),
    ]);
  }
  // Stopped by the caller: the batch goes on; report a result only if it happened to finish first.
  if (signal?.aborted) return result.catch(() => undefined);
  return result;
}
