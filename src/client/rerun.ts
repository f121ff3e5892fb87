// A re-run of a closed batch (same CSV, same batch id): what the earlier run was started with, and the wait a
// terminated run needs before anything is sent again. A terminated batch's prompts end at once, but a submit
// already on the wire goes on in its worker until the gateway answers (at most the submit timeout) and only
// then journals its job id; a re-run that read the journal before that would pay for the row again.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client, WorkflowExecutionDescription } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { BatchInput } from '../contract/batch';
import { DEFAULT_SUBMIT_TIMEOUT_MS } from '../contract/batch-options';

/** The input the batch's latest run was started with (a continue-as-new run carries the same options). */
export async function previousInput(client: Client, batchId: string): Promise<BatchInput | undefined> {
  try {
    const history = await client.workflow.getHandle(batchId).fetchHistory();
    const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    return payload ? defaultPayloadConverter.fromPayload<BatchInput>(payload) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * When the batch was terminated less than one submit timeout ago while prompts were submitting, waits until
 * that timeout has passed since the termination, so every submit that was on the wire has journalled its
 * job id before the re-run reads the journal. Returns the ms waited.
 */
export async function waitForTerminatedSubmits(
  client: Client,
  batchId: string,
  previous: WorkflowExecutionDescription,
  submitTimeoutMs = DEFAULT_SUBMIT_TIMEOUT_MS,
  log: (message: string) => void = (m) => console.error(m),
): Promise<number> {
  if (previous.status.name !== 'TERMINATED' || !previous.closeTime) return 0;
  const until = previous.closeTime.getTime() + submitTimeoutMs;
  if (until <= Date.now()) return 0;
  const { count: submitting } = await client.workflow.count(
    `BatchId = '${batchId}' AND WorkflowType = 'promptWorkflow' AND VidbatchState = 'submitting' AND ExecutionStatus = 'Terminated'`,
  );
  if (submitting === 0) return 0;
  const waitMs = until - Date.now();
  log(
    `${batchId} was terminated ${Math.round((Date.now() - previous.closeTime.getTime()) / 1000)} s ago with ${submitting} row(s) submitting: ` +
      `waiting ${Math.ceil(waitMs / 1000)} s (the submit timeout) so a submit still on the wire records its job id before this run reads the jobs journal`,
  );
  await sleep(waitMs);
  return waitMs;
}
