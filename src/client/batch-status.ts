// Reading batches that exist: where one stands, recent batches, where its manifest is. Asks the batch itself
// (a query, which needs a worker) when it runs, and Temporal visibility for the rest.
import { join, resolve } from 'node:path';
import type { Client } from '@temporalio/client';
import type { BatchProgress, BatchResult } from '../contract/types';
import { manifestPath as manifestIn } from '../results/manifest';
import { batchHandle, getProgress } from './batches';

export const PROMPT_STATES = ['submitting', 'running', 'blocked', 'succeeded', 'failed'] as const;

export interface BatchStatus {
  batchId: string;
  /** Temporal's status of the batch workflow: RUNNING, COMPLETED, CANCELLED, FAILED, TERMINATED... */
  workflowStatus: string;
  startTime: Date;
  closeTime?: Date;
  /** From the running batch itself (needs a worker), when it answered. */
  progress?: BatchProgress;
  result?: BatchResult;
  /** Prompt workflows per VidbatchState, from Temporal visibility (no worker needed). */
  promptStates: Record<(typeof PROMPT_STATES)[number], number>;
}

export async function promptStateCounts(
  client: Client,
  batchId: string,
): Promise<BatchStatus['promptStates']> {
  const counts = {} as BatchStatus['promptStates'];
  for (const state of PROMPT_STATES) {
    const { count } = await client.workflow.count(
      `BatchId = '${batchId}' AND WorkflowType = 'promptWorkflow' AND VidbatchState = '${state}'`,
    );
    counts[state] = count;
  }
  return counts;
}

export async function batchStatus(client: Client, batchId: string): Promise<BatchStatus> {
  const handle = batchHandle(client, batchId);
  const description = await handle.describe();
  const status: BatchStatus = {
    batchId,
    workflowStatus: description.status.name,
    startTime: description.startTime,
    closeTime: description.closeTime,
    promptStates: await promptStateCounts(client, batchId),
  };
  if (description.status.name === 'RUNNING') status.progress = await getProgress(handle);
  if (description.status.name === 'COMPLETED') status.result = await handle.result();
  return status;
}

export interface BatchSummary {
  batchId: string;
  workflowStatus: string;
  startTime: Date;
  closeTime?: Date;
  total?: number;
  succeeded?: number;
  failed?: number;
}

/** Recent batches, newest first, from Temporal visibility (one row per batch, not per run). */
export async function listBatches(client: Client, limit = 20): Promise<BatchSummary[]> {
  const seen = new Map<string, BatchSummary>();
  for await (const wf of client.workflow.list({
    query: `WorkflowType = 'batchWorkflow'`,
  })) {
    if (seen.has(wf.workflowId)) continue;
    seen.set(wf.workflowId, {
      batchId: wf.workflowId,
      workflowStatus: wf.status.name,
      startTime: wf.startTime,
      closeTime: wf.closeTime,
    });
    if (seen.size >= limit) break;
  }
  const rows = [...seen.values()];
  for (const row of rows) {
    const handle = batchHandle(client, row.batchId);
    const figures = row.workflowStatus === 'COMPLETED' ? await handle.result() : await getProgress(handle);
    if (figures)
      Object.assign(row, { total: figures.total, succeeded: figures.succeeded, failed: figures.failed });
  }
  return rows.sort((a, b) => b.startTime.getTime() - a.startTime.getTime());
}

/** The manifest of a batch: where the batch says it is, else `<outRoot>/<batchId>/manifest.jsonl`. */
export async function findManifest(client: Client, batchId: string, outRoot = 'out'): Promise<string> {
  const handle = batchHandle(client, batchId);
  const state = (await handle.describe().catch(() => undefined))?.status.name;
  const known =
    state === 'COMPLETED'
      ? (await handle.result()).manifestPath
      : state === 'RUNNING'
        ? (await getProgress(handle))?.manifestPath
        : undefined;
  return known || resolve(manifestIn(join(outRoot, batchId)));
}
