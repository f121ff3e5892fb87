// A re-run of a closed batch (same CSV, same batch id): what the earlier run was started with, and the wait a
// terminated run needs before anything is sent again. Prompts outlive their batch's run (the window slides
// across continue-as-new), so a terminated batch's prompts are terminated here, before its re-run starts them
// again. A submit already on the wire goes on in its worker until the gateway answers (at most the submit
// timeout) and only then journals its job id; a re-run that read the journal before that would pay for the
// row again. A prompt still checking its job for a late video after its row ended is ended too: the re-run
// checks that job itself.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client, WorkflowExecutionDescription } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { BatchInput } from '../contract/batch';
import { DEFAULT_SUBMIT_TIMEOUT_MS } from '../contract/batch-options';
import { journalPath, type JournalEntry } from '../results/jobs-journal';
import { JsonlTail } from '../results/jsonl';
import { promptWorkflowId } from '../contract/prompt';
import { StateAttr } from '../contract/search-attributes';

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
 * every one of those rows has journalled an outcome since its prompt started (read in `journalDir`, when this
 * process can see the batch's folder), or else until that timeout has passed since the termination: then every
 * submit that was on the wire has journalled its job id before the re-run reads the journal. Returns the ms
 * waited.
 */
export async function waitForTerminatedSubmits(
  client: Client,
  batchId: string,
  previous: WorkflowExecutionDescription,
  submitTimeoutMs = DEFAULT_SUBMIT_TIMEOUT_MS,
  log: (message: string) => void = (m) => console.error(m),
  journalDir?: string,
): Promise<number> {
  if (previous.status.name !== 'TERMINATED' || !previous.closeTime) return 0;
  const ended = await terminatePrompts(client, batchId);
  const until = Math.max(previous.closeTime.getTime(), ended) + submitTimeoutMs;
  if (until <= Date.now()) return 0;
  const submitting = new Map<string, number>(); // row id -> when its prompt started
  for await (const prompt of client.workflow.list({
    // Not by ExecutionStatus: the prompts terminated just now may not read as terminated yet.
    query: `BatchId = '${batchId}' AND WorkflowType = 'promptWorkflow' AND VidbatchState = 'submitting'`,
  }))
    submitting.set(
      prompt.workflowId.slice(prompt.workflowId.lastIndexOf('/') + 1),
      prompt.startTime.getTime(),
    );
  const started = Date.now();
  // Only what was appended since the last look is read: a big batch's journal is not read whole every second.
  const journal = journalDir ? new JsonlTail<JournalEntry>(journalPath(journalDir)) : undefined;
  const done = new Set<string>();
  const unjournalled = async () => {
    const read = await journal?.read().catch(() => undefined);
    if (!read) return submitting.size;
    if (read.reset) done.clear();
    // An entry written by this prompt's submit (a worker clock behind the server's only makes the wait longer).
    for (const e of read.records)
      if (typeof e.rowId === 'string' && Date.parse(e.at) >= (submitting.get(e.rowId) ?? Infinity))
        done.add(e.rowId);
    return [...submitting.keys()].filter((row) => !done.has(row)).length;
  };
  let left = await unjournalled();
  if (left === 0) return 0;
  log(
    `${batchId} was terminated ${Math.round((Date.now() - previous.closeTime.getTime()) / 1000)} s ago with ${left} row(s) submitting: ` +
      `waiting up to ${Math.ceil((until - Date.now()) / 1000)} s (the submit timeout) so a submit still on the wire records its job id before this run reads the jobs journal`,
  );
  while (left > 0 && Date.now() < until) {
    await sleep(Math.min(1000, until - Date.now()));
    left = await unjournalled();
  }
  return Date.now() - started;
}

/**
 * Terminates the prompts a terminated batch left running (they were started to outlive its runs), as
 * terminating a batch is meant to end it whole. Returns when the last was terminated (0: none was running).
 */
async function terminatePrompts(client: Client, batchId: string): Promise<number> {
  let last = 0;
  for await (const prompt of client.workflow.list({
    query: `BatchId = '${batchId}' AND WorkflowType = 'promptWorkflow' AND ExecutionStatus = 'Running'`,
  })) {
    await client.workflow
      .getHandle(prompt.workflowId)
      .terminate('its batch was terminated; the re-run starts this row again')
      .catch(() => undefined); // it ended meanwhile
    last = Date.now();
  }
  return last;
}

/** A prompt's states once its row ended: it may still run, checking its job for a late video (`late`). */
const ROW_ENDED_STATES: ReadonlySet<unknown> = new Set(['late', 'failed', 'succeeded']);

/**
 * Ends the late checks a closed batch's prompts still make (workflows/late-video.ts: a row that ended on its
 * deadline or with a cancel keeps checking its job for a late video), before its re-run starts those rows'
 * prompts again under the same workflow ids: each such row's new prompt checks the same job first, so
 * nothing is lost and nothing is paid again. Each running prompt's state is read from the prompt itself (a
 * listing's search attributes may lag behind a state set just now). Returns how many were ended.
 */
export async function endLateChecks(client: Client, batchId: string): Promise<number> {
  let ended = 0;
  for await (const prompt of client.workflow.list({
    query: `BatchId = '${batchId}' AND WorkflowType = 'promptWorkflow' AND ExecutionStatus = 'Running'`,
  })) {
    const handle = client.workflow.getHandle(prompt.workflowId);
    const state = await handle
      .describe()
      .then((d) => (d.status.name === 'RUNNING' ? d.typedSearchAttributes.get(StateAttr) : undefined))
      .catch(() => undefined);
    if (!ROW_ENDED_STATES.has(state)) continue;
    await handle
      .terminate("its batch runs again: the re-run checks this row's job itself")
      .then(() => (ended += 1))
      .catch(() => undefined); // it ended meanwhile
  }
  return ended;
}

/**
 * Ends the late checks of these rows' prompts, whose late videos were kept elsewhere (`vidbatch download`
 * recorded them): no worker fetches them again. Prompts in another state are left alone.
 */
export async function endLateChecksOf(
  client: Client,
  batchId: string,
  rowIds: readonly string[],
  reason: string,
): Promise<void> {
  for (const rowId of rowIds) {
    const handle = client.workflow.getHandle(promptWorkflowId(batchId, rowId));
    const late = await handle
      .describe()
      .then((d) => d.status.name === 'RUNNING' && d.typedSearchAttributes.get(StateAttr) === 'late')
      .catch(() => false);
    if (late) await handle.terminate(reason).catch(() => undefined);
  }
}
