// Reading batches that exist: where one stands, recent batches, where its manifest is. Asks the batch itself
// (a query, which needs a worker) when it runs, and Temporal visibility for the rest.
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Client } from '@temporalio/client';
import { FailureType } from '../contract/failures';
import {
  fairnessKey,
  gatewayQueue,
  rateBudgetQuery,
  rateBudgetWorkflowId,
  type BatchShare,
} from '../contract/rate-budget';
import type { BatchResult } from '../contract/batch';
import type { BatchProgress } from '../contract/progress';
import { computeLedger, type Ledger } from '../results/ledger';
import { manifestPath as manifestIn, summarizeManifest, type ManifestSummary } from '../results/manifest';
import type { Prices } from '../results/prices';
import { batchHandle, checkSameVersion, getProgress } from './batch-handle';
import { previousInput } from './rerun';
import { isStoreUrl, joinStorePath } from '../store/store-url';
import { loadStoreSetting } from '../config';
import type { Session } from './session';
import { pollersOf } from './target';

/** A prompt's VidbatchState; `late`: its row ended, and it checks its job for a late video (workflows/late-video.ts). */
export const PROMPT_STATES = ['submitting', 'running', 'blocked', 'succeeded', 'failed', 'late'] as const;

export interface BatchStatus {
  batchId: string;
  /** The account it pays on (config.ts gatewayTarget), from its memo. */
  target?: string;
  /** Temporal's status of the batch workflow: RUNNING, COMPLETED, CANCELLED, FAILED, TERMINATED... */
  workflowStatus: string;
  startTime: Date;
  closeTime?: Date;
  /** From the running batch itself (needs a worker), when it answered. */
  progress?: BatchProgress;
  result?: BatchResult;
  /** Prompt workflows per VidbatchState, from Temporal visibility (no worker needed). */
  promptStates: Record<(typeof PROMPT_STATES)[number], number>;
  /**
   * The manifest's final state (last line per row wins), when this process can read it: the truth for a
   * cancelled, failed or terminated batch, and across re-runs.
   */
  final?: ManifestSummary;
  /** This batch's share of the shared gateway budget's calls, from the learner. */
  budget?: BudgetShare;
  /** Every job the gateway made for the batch (results/ledger.ts), when this process can read its folder. */
  ledger?: Ledger;
}

export interface BudgetShare extends BatchShare {
  /** The gateway queue's limit now (requests/second), null before the learner set one. */
  limit: number | null;
  /** Batches that made gateway calls in the window, this one included. */
  batches: number;
  /** Why the limit is what it is (the learner's reason). */
  why?: string;
}

/** This batch's share of the shared gateway budget over the last 30 s, if it made calls on it. */
export async function budgetShare(
  client: Client,
  batchId: string,
  taskQueue: string,
): Promise<BudgetShare | undefined> {
  const learner = client.workflow.getHandle(rateBudgetWorkflowId(gatewayQueue(taskQueue)));
  const snapshot = await learner.query(rateBudgetQuery).catch(() => undefined);
  const key = fairnessKey(batchId);
  const mine = snapshot?.batches?.find((b) => b.batch === key);
  if (!snapshot || !mine) return undefined;
  return {
    ...mine,
    limit: snapshot.applied,
    batches: snapshot.batches?.length ?? 1,
    ...(snapshot.why ? { why: snapshot.why } : {}),
  };
}

export async function promptStateCounts(
  client: Client,
  batchId: string,
): Promise<BatchStatus['promptStates']> {
  const counts = {} as BatchStatus['promptStates'];
  for (const state of PROMPT_STATES) {
    // `late` is a state of running prompts only: one ended from outside (terminated) keeps it as its last.
    const running = state === 'late' ? " AND ExecutionStatus = 'Running'" : '';
    const { count } = await client.workflow.count(
      `BatchId = '${batchId}' AND WorkflowType = 'promptWorkflow' AND VidbatchState = '${state}'${running}`,
    );
    counts[state] = count;
  }
  return counts;
}

/** Where a batch stands; `outRoot` locates its manifest when the batch cannot say (see findManifest). */
export async function batchStatus(
  client: Client,
  batchId: string,
  outRoot = 'out',
  o: { prices?: Prices; taskQueue?: string } = {},
): Promise<BatchStatus> {
  const handle = batchHandle(client, batchId);
  const description = await handle.describe();
  if (o.taskQueue) checkSameVersion(description, o.taskQueue);
  const status: BatchStatus = {
    batchId,
    ...(typeof description.memo?.target === 'string' ? { target: description.memo.target } : {}),
    workflowStatus: description.status.name,
    startTime: description.startTime,
    closeTime: description.closeTime,
    promptStates: await promptStateCounts(client, batchId),
  };
  if (description.status.name === 'RUNNING') {
    status.progress = await getProgress(handle);
    // The learner runs on the same task queue: no answer from the batch, no worker to answer for it either.
    const budget = status.progress && (await budgetShare(client, batchId, description.taskQueue));
    if (budget) status.budget = budget;
  }
  if (status.progress && !status.progress.holdUntil) {
    const held = await pollsHeldUntil(client, batchId).catch(() => undefined);
    if (held) Object.assign(status.progress, { holdUntil: held, holdReason: null });
  }
  if (description.status.name === 'COMPLETED') status.result = await handle.result();
  // The progress asked for above says where the manifest is: not asked again (no worker may answer).
  const manifest = await findManifest(client, batchId, outRoot, { progress: status.progress }).catch(
    () => undefined,
  );
  if (manifest) {
    const final = await summarizeManifest(manifest).catch(() => undefined);
    if (final?.rows) status.final = final;
    const rows =
      status.progress?.total ?? status.result?.total ?? (await previousInput(client, batchId))?.totalRows;
    const ledger = await computeLedger(dirname(manifest), { rows, prices: o.prices }).catch(() => undefined);
    if (ledger && (ledger.jobsMade || ledger.unknown)) status.ledger = ledger;
  }
  return status;
}

/**
 * When the gateway holds status checks with a Retry-After (a quota may reset hours later), the prompts' poll
 * activities wait in their retries and the batch itself is not told (it learns of holds from submits, and a
 * full window submits nothing). Each worker then holds its other status checks too, so one pending activity shows
 * it: a last failure of type RateLimited, its next attempt at the end of the hold. Looks through up to `max`
 * running prompts; that time, or undefined.
 */
export async function pollsHeldUntil(client: Client, batchId: string, max = 50): Promise<number | undefined> {
  let seen = 0;
  for await (const wf of client.workflow.list({
    query: `BatchId = '${batchId}' AND WorkflowType = 'promptWorkflow' AND ExecutionStatus = 'Running'`,
  })) {
    const { raw } = await client.workflow.getHandle(wf.workflowId, wf.runId).describe();
    for (const activity of raw.pendingActivities ?? []) {
      if (activity.lastFailure?.applicationFailureInfo?.type !== FailureType.RateLimited) continue;
      const ts = activity.nextAttemptScheduleTime;
      const next = ts ? Number(ts.seconds ?? 0) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6) : 0;
      if (next > Date.now()) return next;
    }
    if (++seen >= max) break;
  }
  return undefined;
}

export interface BatchSummary {
  batchId: string;
  /** The account it pays on (config.ts gatewayTarget), from its memo. */
  target?: string;
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
      ...(typeof wf.memo?.target === 'string' ? { target: wf.memo.target } : {}),
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

/**
 * The manifest of a batch: where the batch says it is, else `<outRoot>/<batchId>/manifest.jsonl`. `asked`: the
 * progress the caller already asked a running batch for (undefined: it did not answer), so it is not asked again.
 */
export async function findManifest(
  client: Client,
  batchId: string,
  outRoot = 'out',
  asked?: { progress: BatchProgress | undefined },
): Promise<string> {
  const handle = batchHandle(client, batchId);
  const state = (await handle.describe().catch(() => undefined))?.status.name;
  const known =
    state === 'COMPLETED'
      ? (await handle.result()).manifestPath
      : state === 'RUNNING'
        ? (asked ? asked.progress : await getProgress(handle))?.manifestPath
        : undefined;
  if (known) return known;
  // A batch that kept its results in the store says where in its input; once Temporal no longer has the batch,
  // the folder here, else this process's store.
  const outDir = (await previousInput(client, batchId))?.options.outDir;
  if (outDir && isStoreUrl(outDir)) return manifestIn(outDir);
  const local = resolve(manifestIn(join(outRoot, batchId)));
  const store = loadStoreSetting();
  return store && !existsSync(local) ? manifestIn(joinStorePath(store, batchId)) : local;
}

/**
 * The folder on this machine for a batch's exports, videos and gallery: its manifest's, or for a batch whose
 * results are in the store, `<outRoot>/<batchId>`.
 */
export function localFolderOf(manifest: string, outRoot: string, batchId: string): string {
  return isStoreUrl(manifest) ? resolve(outRoot, batchId) : dirname(manifest);
}

/**
 * The rows of a batch whose prompts check their jobs for late videos while a worker serves the batch's task
 * queue (workflows/late-video.ts): `vidbatch download` leaves those to the workers. Empty when no worker polls
 * the queue (as after `run` on the embedded server), or when none is checked.
 */
export async function lateChecksServed(session: Session, batchId: string): Promise<Set<string>> {
  const served = new Set<string>();
  const taskQueue = (
    await batchHandle(session.client, batchId)
      .describe()
      .catch(() => undefined)
  )?.taskQueue;
  if (!taskQueue || (await pollersOf(session, taskQueue).catch(() => [])).length === 0) return served;
  for await (const prompt of session.client.workflow.list({
    query: `BatchId = '${batchId}' AND WorkflowType = 'promptWorkflow' AND VidbatchState = 'late' AND ExecutionStatus = 'Running'`,
  }))
    served.add(prompt.workflowId.slice(batchId.length + 1));
  return served;
}
