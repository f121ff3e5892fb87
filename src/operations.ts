// Operating batches that already exist: find them, read their state, export their results, retry their
// failures. The CLI's operator commands are thin wrappers around these functions.
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import proto from '@temporalio/proto';
import { stringify } from 'csv-stringify/sync';
import { loadCsv } from './input/csv';
import { downloadVerified } from './results/download';
import { manifestPath as manifestIn, readManifest } from './results/manifest';
import type { BatchProgress, BatchResult, PromptResult } from './contract/types';
import { batchIdFor, getProgress } from './starter';
import type { batchWorkflow } from './workflows';

const BATCH_ID = /^batch-[0-9a-f]{16}$/;

/** A batch is named by its id or by the CSV it was made from. */
export async function resolveBatchId(ref: string): Promise<string> {
  if (BATCH_ID.test(ref)) return ref;
  if (existsSync(ref)) return batchIdFor(await loadCsv(ref));
  throw new Error(`"${ref}" is neither a batch id (batch-<16 hex>) nor a CSV file`);
}

export function batchHandle(client: Client, batchId: string): WorkflowHandle<typeof batchWorkflow> {
  return client.workflow.getHandle<typeof batchWorkflow>(batchId);
}

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

/** The columns of an input CSV that reproduce a row exactly (input.* and parameters.* included). */
export function inputRows(results: PromptResult[]): string[][] {
  const inputKeys = [...new Set(results.flatMap((r) => Object.keys(r.input ?? {})))]
    .filter((k) => k !== 'prompt')
    .sort();
  const paramKeys = [...new Set(results.flatMap((r) => Object.keys(r.parameters ?? {})))]
    .filter((k) => k !== 'resolution' && k !== 'duration')
    .sort();
  const cell = (v: unknown) => (v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v));
  const header = [
    'id',
    'prompt',
    'model',
    'resolution',
    'duration',
    ...inputKeys.map((k) => `input.${k}`),
    ...paramKeys.map((k) => `parameters.${k}`),
  ];
  return [
    header,
    ...results.map((r) => [
      r.rowId,
      r.prompt,
      r.model,
      cell(r.parameters?.resolution),
      cell(r.parameters?.duration),
      ...inputKeys.map((k) => cell(r.input?.[k])),
      ...paramKeys.map((k) => cell(r.parameters?.[k])),
    ]),
  ];
}

const RESULT_COLUMNS = [
  'rowId',
  'line',
  'status',
  'prompt',
  'model',
  'jobId',
  'url',
  'errorCode',
  'errorMessage',
  'attempts',
  'polls',
  'submittedAt',
  'finishedAt',
] as const;

export interface ExportedResults {
  succeeded: number;
  failed: number;
  files: string[];
}

/**
 * Writes `succeeded.<fmt>` and `failed.<fmt>` into `dir`. As CSV, the succeeded file lists results and the
 * failed file is a valid input CSV (its errors go to `failed-errors.csv`), so it can be fixed and run again.
 */
export async function exportResults(
  manifest: string,
  dir: string,
  format: 'csv' | 'jsonl',
): Promise<ExportedResults> {
  const results = (await readManifest(manifest)).sort((a, b) => a.line - b.line);
  const succeeded = results.filter((r) => r.status === 'succeeded');
  const failed = results.filter((r) => r.status === 'failed');
  await mkdir(dir, { recursive: true });
  const files: string[] = [];
  const write = async (name: string, text: string) => {
    files.push(join(dir, name));
    await writeFile(join(dir, name), text);
  };
  if (format === 'jsonl') {
    const jsonl = (rows: PromptResult[]) =>
      rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');
    await write('succeeded.jsonl', jsonl(succeeded));
    await write('failed.jsonl', jsonl(failed));
  } else {
    const table = (rows: PromptResult[]) =>
      stringify([[...RESULT_COLUMNS], ...rows.map((r) => RESULT_COLUMNS.map((c) => String(r[c] ?? '')))]);
    await write('succeeded.csv', table(succeeded));
    await write('failed.csv', stringify(inputRows(failed)));
    await write('failed-errors.csv', table(failed));
  }
  return { succeeded: succeeded.length, failed: failed.length, files };
}

/** Writes an input CSV of the failed rows (optionally of one error code) and returns its path and row count. */
export async function failedRowsCsv(
  manifest: string,
  dir: string,
  batchId: string,
  errorCode?: string,
): Promise<{ path: string; rows: number }> {
  const failed = (await readManifest(manifest))
    .filter((r) => r.status === 'failed' && (!errorCode || r.errorCode === errorCode))
    .sort((a, b) => a.line - b.line);
  await mkdir(dir, { recursive: true });
  const path = join(dir, `retry-of-${batchId}${errorCode ? `-${errorCode}` : ''}.csv`);
  await writeFile(path, stringify(inputRows(failed)));
  return { path, rows: failed.length };
}

export interface DownloadReport {
  rowId: string;
  file?: string;
  sha256?: string;
  bytes?: number;
  reused?: boolean;
  error?: string;
}

/**
 * Downloads every succeeded row's video into `dir` (`<rowId>.mp4`), `concurrency` at a time, verifying each and
 * skipping files already verified; writes `downloads.jsonl` there and returns one report per row.
 */
export async function downloadBatch(
  manifest: string,
  dir: string,
  concurrency = 4,
): Promise<DownloadReport[]> {
  const rows = (await readManifest(manifest)).filter((r) => r.status === 'succeeded' && r.url);
  const reports: DownloadReport[] = [];
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < rows.length; i = next++) {
      const row = rows[i]!;
      let report: DownloadReport = { rowId: row.rowId, error: 'not attempted' };
      for (let attempt = 1; attempt <= 3; attempt++) {
        try {
          const got = await downloadVerified(row.url!, dir, `${row.rowId}.mp4`, {
            expectedSha256: row.sha256,
          });
          report = { rowId: row.rowId, ...got };
          break;
        } catch (err) {
          report = { rowId: row.rowId, error: (err as Error).message };
          if (!(err as { retryable?: boolean }).retryable) break;
          await new Promise((r) => setTimeout(r, 1000 * attempt));
        }
      }
      reports.push(report);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'downloads.jsonl'), reports.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return reports;
}

export interface HistoryStats {
  batchRuns: number;
  batchEvents: number;
  /** The largest single run's history (the batch's or a prompt's), in events. */
  largestRunEvents: number;
  prompts: number;
  promptEvents: number;
  /** (batch events + prompt events) / prompts: what one row costs in history. */
  eventsPerPrompt: number;
  /** Estimated Temporal Cloud actions (workflow and activity starts, every activity retry, timers, signals, upserts, updates) per prompt. */
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

/** Actions in one history: each activity attempt counts (polls by retry are actions), as do the events above. */
function billableActions(events: proto.temporal.api.history.v1.IHistoryEvent[]): number {
  let actions = 0;
  for (const event of events) {
    const type = proto.temporal.api.enums.v1.EventType[event.eventType ?? 0];
    if (type === 'EVENT_TYPE_ACTIVITY_TASK_STARTED')
      actions += event.activityTaskStartedEventAttributes?.attempt ?? 1;
    else if (type && BILLABLE.has(type)) actions += 1;
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
