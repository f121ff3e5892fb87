// Batches from the client side: the id of a CSV's batch, start or attach, follow until done. The batch id
// comes from the CSV's content, so running the same file again attaches to the same batch.
import { createReadStream, existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  WorkflowExecutionAlreadyStartedError,
  type Client,
  type WorkflowExecutionDescription,
  type WorkflowHandle,
} from '@temporalio/client';
import proto from '@temporalio/proto';
import { progressQuery } from '../contract/messages';
import { BatchIdAttr, StateAttr } from '../contract/search-attributes';
import type { BatchInput, BatchResult } from '../contract/batch';
import { DEFAULT_BATCH_OPTIONS, concurrencyProblem, type BatchOptions } from '../contract/batch-options';
import type { BatchProgress } from '../contract/progress';
import { loadWorkerSettings } from '../config';
import { ConfigError, OtherVersionBatchError, UnservedBatchError } from '../errors';
import { loadCsv, loadCsvFrom, loadValidCsv, type ParsedCsv } from '../input/csv';
import { rowsFileKey, writeRowsFile } from '../input/rows-file';
import { putInput, sourceName, type CsvSource } from '../store/inputs';
import { LocalStore } from '../store/local-store';
import { objectAt, openStore } from '../store/open-store';
import { isStoreUrl, joinStorePath } from '../store/store-url';
import { failedRowsCsv, retryCsvPath, type LeftOut } from '../results/export';
import { findManifest, localFolderOf } from './batch-status';
import { previousInput, waitForTerminatedSubmits } from './rerun';
import { batchWorkflow } from '../workflows';
import type { Session } from './session';
import { queueBase } from './task-queue';

export function batchIdFor(csv: ParsedCsv): string {
  return `batch-${csv.sha256.slice(0, 16)}`;
}

const BATCH_ID = /^batch-[0-9a-f]{16}$/;

/** A batch is named by its id or by the CSV it was made from. */
export async function resolveBatchId(ref: string): Promise<string> {
  if (BATCH_ID.test(ref)) return ref;
  if (existsSync(ref)) return batchIdFor(await loadCsv(ref));
  throw new Error(`"${ref}" is neither a batch id (batch-<16 hex>) nor a CSV file`);
}

/**
 * Throws OtherVersionBatchError when the batch is open on another task queue than `taskQueue` (this version's):
 * a 0.x batch, which this version's workers never pick up and must not attach to or start again.
 */
export function checkSameVersion(description: WorkflowExecutionDescription, taskQueue: string): void {
  if (description.status.name === 'RUNNING' && queueBase(description.taskQueue) !== queueBase(taskQueue))
    throw new OtherVersionBatchError(description.workflowId, description.taskQueue, taskQueue);
}

/**
 * Cancels a batch. A batch of another major version (0.x) is terminated instead: no worker of this version
 * polls its task queue, so a cancel request would wait forever for a 0.x worker. Its jobs are in the jobs
 * journal, so running its file again checks them instead of paying again.
 */
export async function cancelBatch(
  client: Client,
  batchId: string,
  taskQueue: string,
): Promise<'cancelled' | 'terminated'> {
  const handle = batchHandle(client, batchId);
  const description = await handle.describe();
  if (description.status.name === 'RUNNING' && queueBase(description.taskQueue) !== queueBase(taskQueue)) {
    await handle.terminate(
      `cancelled from vidbatch 1.x: no worker of this version runs task queue "${description.taskQueue}"`,
    );
    return 'terminated';
  }
  await handle.cancel();
  return 'cancelled';
}

/** Whether any worker has polled `taskQueue` lately (the server keeps pollers of the last few minutes). */
async function polled(session: Session, taskQueue: string): Promise<boolean> {
  const { pollers } = await session.client.workflowService.describeTaskQueue({
    namespace: session.namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  return (pollers ?? []).length > 0;
}

export function batchHandle(client: Client, batchId: string): WorkflowHandle<typeof batchWorkflow> {
  return client.workflow.getHandle<typeof batchWorkflow>(batchId);
}

/**
 * `outDir` and `downloadDir` are ROOTS shared by batches: each batch writes its manifest and jobs journal in
 * `<outDir>/<batchId>/` and its videos in `<downloadDir>/<batchId>/`, so batches never mix. Without `outDir`
 * the worker's root (`vidbatch worker --out`, default `out`) is used the same way; without `downloadDir` the
 * videos go into the batch's own output folder, unless `download` is false.
 */
export interface StartBatchOptions extends Partial<Omit<BatchOptions, 'poll'>> {
  poll?: Partial<BatchOptions['poll']>;
  /** This batch retries the failed rows of that one. */
  retryOf?: string;
  /** retry-failed: the original batch's output folder, whose jobs are checked before paying again. */
  priorOutDir?: string;
}

/**
 * A file edited while its batch runs makes a new batch; the old one pauses when it next reads the file, or, when
 * its CSV was put in the store, runs on from that copy. Says so, and what to do with it, for every batch still
 * running from the same path.
 */
async function sayOlderBatchesOf(
  session: Session,
  csvPath: string,
  batchId: string,
  log: (message: string) => void,
): Promise<void> {
  try {
    const query = `WorkflowType = '${batchWorkflow.name}' AND ExecutionStatus = 'Running'`;
    for await (const w of session.client.workflow.list({ query })) {
      if (w.workflowId === batchId || w.memo?.csvPath !== csvPath) continue;
      const stored = typeof w.memo?.csvRef === 'string' && isStoreUrl(w.memo.csvRef);
      log(
        `${w.workflowId} was started from ${csvPath} before it changed and is still running: ` +
          (stored
            ? 'it reads its copy of the file in the store, so it runs on to its end. '
            : 'it pauses when it next reads the file (its rows in flight finish). ') +
          `Cancel it (\`vidbatch cancel ${w.workflowId}\`): ${batchId} checks the jobs it made for unchanged rows and pays only for what changed.`,
      );
    }
  } catch {
    // Advice only: a server without visibility queries still runs the batch.
  }
}

/** A batch's own folder under a shared root: `<root>/<batchId>`. */
export function batchDir(root: string, batchId: string): string {
  return resolve(root, batchId);
}

/** Drops undefined values, so an unset flag never overrides a default. */
function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** "concurrency 3 -> 5"-style differences between a batch's options and those of its re-run. */
function changedOptions(before: BatchOptions, after: BatchOptions): string[] {
  const flat = (o: BatchOptions): Record<string, unknown> => {
    const { poll, ...rest } = o;
    return { ...rest, ...Object.fromEntries(Object.entries(poll).map(([k, v]) => [`poll.${k}`, v])) };
  };
  const a = flat(before);
  const b = flat(after);
  return [...new Set([...Object.keys(a), ...Object.keys(b)])]
    .filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]))
    .map((k) => `${k} ${JSON.stringify(a[k]) ?? 'unset'} -> ${JSON.stringify(b[k]) ?? 'unset'}`);
}

export interface StartedBatch {
  handle: WorkflowHandle<typeof batchWorkflow>;
  batchId: string;
  /** The batch was already running or completed: this attached to it. */
  attached: boolean;
  /** The task queue of the running batch this attached to, when it is not this process's: only followed here. */
  runsOn?: string;
}

/** Validates the CSV (nothing is submitted from a file with errors), then starts its batch or attaches to it. */
export async function startBatch(
  session: Session,
  /** A file, or (with VIDBATCH_STORE) an object the caller opened and parsed. */
  source: CsvSource,
  options: StartBatchOptions = {},
  /** The file already parsed and validated by the caller, so it is not read twice. */
  parsed?: ParsedCsv,
  log: (message: string) => void = (m) => console.error(m),
): Promise<StartedBatch> {
  if (!parsed && typeof source !== 'string') throw new Error('startBatch: an object source comes parsed');
  const csv = parsed ?? (await loadValidCsv(source as string));
  const csvPath = sourceName(source, resolve);
  const batchId = batchIdFor(csv);
  const { retryOf, priorOutDir, ...rest } = options;
  const previous = await session.client.workflow
    .getHandle(batchId)
    .describe()
    .catch(() => undefined);
  if (previous) checkSameVersion(previous, session.taskQueue);
  // Running for another gateway (another terminal, key or --simulate): its own workers run it; this process
  // only follows it, and never runs its rows with this process's gateway.
  if (previous?.status.name === 'RUNNING' && previous.taskQueue !== session.taskQueue) {
    if (!(await polled(session, previous.taskQueue)))
      throw new UnservedBatchError(batchId, previous.taskQueue);
    const handle = session.client.workflow.getHandle<typeof batchWorkflow>(batchId);
    return { handle, batchId, attached: true, runsOn: previous.taskQueue };
  }
  // Failed, cancelled or terminated batches may be started again (the new run continues from what the earlier
  // ones recorded: rows that succeeded are not submitted, known jobs are checked); running or completed ones
  // are attached to.
  const attached = !!previous && ['RUNNING', 'COMPLETED', 'CONTINUED_AS_NEW'].includes(previous.status.name);
  const before = previous && !attached ? await previousInput(session.client, batchId) : undefined;
  // Options are resolved here, once: a flag given, else the batch's stored options (a re-run keeps its own;
  // what was given again and differs is applied, and said), else the defaults. Workflows apply none.
  const stored: Partial<BatchOptions> = before?.options ?? {};
  const batchOptions: BatchOptions = {
    ...DEFAULT_BATCH_OPTIONS,
    ...definedOnly(stored),
    ...definedOnly(rest),
    poll: {
      ...DEFAULT_BATCH_OPTIONS.poll,
      ...definedOnly(stored.poll ?? {}),
      ...definedOnly(options.poll ?? {}),
    },
    ...(options.outDir ? { outDir: batchDir(options.outDir, batchId) } : {}),
    ...(options.downloadDir ? { downloadDir: batchDir(options.downloadDir, batchId) } : {}),
    // A retry is a deliberate regeneration: it never reuses another batch's video for its rows.
    ...(retryOf ? { reuse: false } : {}),
  };
  // --no-download given to a batch that had a download root: no root is left to suggest otherwise.
  if (batchOptions.download === false) delete batchOptions.downloadDir;
  const { outRoot, store: storeUrl } = loadWorkerSettings();
  const shared = storeUrl ? await openStore(storeUrl, outRoot) : undefined;
  // With a shared store, a new batch keeps its journal and results there, named by URL (a re-run keeps its
  // batch's place, where its journal is).
  if (shared && !previous && !batchOptions.outDir) batchOptions.outDir = shared.urlOf(batchId);
  if (!shared && batchOptions.outDir && isStoreUrl(batchOptions.outDir))
    throw new ConfigError(
      `${batchId} keeps its journal and results in ${batchOptions.outDir}: set VIDBATCH_STORE (and the store's credentials) to run it again`,
    );
  const windowProblem = concurrencyProblem(batchOptions.concurrency);
  if (windowProblem) throw new ConfigError(`--concurrency ${windowProblem}`);
  if (before) {
    const changed = changedOptions(before.options, batchOptions);
    log(
      `${batchId} was ${previous!.status.name.toLowerCase()}: running it again with its own options` +
        (changed.length ? `, except ${changed.join(', ')} (given again)` : ''),
    );
    const journalDir = before.options.outDir ?? join(outRoot, batchId);
    await waitForTerminatedSubmits(
      session.client,
      batchId,
      previous!,
      before.options.submitTimeoutMs,
      log,
      journalDir,
    );
  }
  // Workers read the rows by position from the rows file (input/rows-file.ts); one that finds it missing writes
  // it from the CSV. With a shared store (VIDBATCH_STORE), the CSV goes there too and the batch names it by URL,
  // so workers need nothing of this machine's; else the rows file goes beside the batch's folder.
  let csvRef = csvPath;
  if (!attached) {
    if (shared) csvRef = await putInput(shared, source, csv.sha256);
    else if (typeof source !== 'string')
      throw new ConfigError(`${csvPath}: a CSV in a bucket needs VIDBATCH_STORE`);
    const store = shared ?? new LocalStore(dirname(resolve(batchOptions.outDir ?? join(outRoot, batchId))));
    const key = rowsFileKey(csv.sha256, batchOptions.enhance);
    await writeRowsFile(store, key, csv.sha256, csv.rows, batchOptions.enhance).catch((err: Error) =>
      log(`could not write ${store.urlOf(key)} (${err.message}): the workers write it from the CSV`),
    );
  }
  const input: BatchInput = {
    batchId,
    csvPath: csvRef,
    csvSha256: csv.sha256,
    totalRows: csv.rows.length,
    options: batchOptions,
    ...(retryOf ? { retryOf } : {}),
    ...(priorOutDir ? { priorOutDir: isStoreUrl(priorOutDir) ? priorOutDir : resolve(priorOutDir) } : {}),
  };
  try {
    const handle = await session.client.workflow.start(batchWorkflow, {
      workflowId: batchId,
      taskQueue: session.taskQueue,
      args: [input],
      // Same file again: attach to the running batch; a finished batch is never run twice.
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      typedSearchAttributes: [
        { key: BatchIdAttr, value: batchId },
        { key: StateAttr, value: 'running' },
      ],
      staticSummary: `vidbatch: ${csv.rows.length} prompts from ${typeof source === 'string' ? source : source.url}`,
      staticDetails:
        `**CSV:** ${csvPath}\n\n**sha256:** ${csv.sha256}\n\n**Window:** ${batchOptions.concurrency} prompts` +
        (retryOf ? `\n\n**Retries the failed rows of:** ${retryOf}` : ''),
      memo: { csvPath, ...(csvRef !== csvPath ? { csvRef } : {}), ...(retryOf ? { retryOf } : {}) },
    });
    if (!attached) await sayOlderBatchesOf(session, csvPath, batchId, log);
    return { handle, batchId, attached };
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    return {
      handle: session.client.workflow.getHandle<typeof batchWorkflow>(batchId),
      batchId,
      attached: true,
    };
  }
}

export async function getProgress(handle: WorkflowHandle): Promise<BatchProgress | undefined> {
  try {
    return await handle.query(progressQuery);
  } catch {
    return undefined; // between runs (continue-as-new) or no worker yet
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

export interface RetryFailedOptions extends StartBatchOptions {
  /** Only rows whose final state failed with this code (e.g. `submit_unknown`, `deadline_exceeded`). */
  code?: string;
  /** Root of the output folders, where the original batch's folder is (default `out`). */
  outRoot?: string;
  /** Told of the earlier retries whose rows are left out (before anything starts, also when nothing does). */
  onEarlier?: (earlier: EarlierRetry[]) => void;
  /** Told of the failed rows a retry without `code` leaves out, by code (export.ts, leftOutReason). */
  onLeftOut?: (leftOut: LeftOut[]) => void;
}

export interface RetryStarted extends StartedBatch {
  /** The input CSV of the rows taken (in the original batch's folder on this machine) and how many. */
  csvPath: string;
  rows: number;
  retryOf: string;
}

/** An earlier retry of the same batch, whose rows a new retry leaves out: where they go on. */
export interface EarlierRetry {
  batchId: string;
  rows: number;
}

/**
 * The retry batches an earlier `retry-failed` of `batchId` started (their CSVs are in its folder, and their
 * batches exist on the server), with the rows each took. Not the one this call would write (same code): that
 * CSV makes the same batch id again, which attaches or re-runs it as any re-run does.
 */
async function earlierRetries(
  client: Client,
  dir: string,
  batchId: string,
  code: string | undefined,
): Promise<{ retry: EarlierRetry; ids: string[] }[]> {
  const own = basename(retryCsvPath(dir, batchId, code));
  const mine = (f: string) => f.startsWith(`retry-of-${batchId}`) && f.endsWith('.csv') && f !== own;
  // A batch in the store keeps its retries' CSVs there, so a retry from any machine sees the earlier ones.
  const stored = isStoreUrl(dir) ? await objectAt(dir) : undefined;
  const names = stored
    ? await (async () => {
        const found: string[] = [];
        for await (const { key } of stored.store.list(`${stored.key}/retry-of-${batchId}`))
          found.push(key.slice(stored.key.length + 1));
        return found;
      })()
    : await readdir(dir).catch(() => [] as string[]);
  const found: { retry: EarlierRetry; ids: string[] }[] = [];
  for (const name of names.filter(mine)) {
    const csv = await (async () => {
      if (!stored) return loadCsv(join(dir, name));
      const chunks = await stored.store.stream(`${stored.key}/${name}`);
      return chunks && loadCsvFrom(chunks, joinStorePath(dir, name));
    })().catch(() => undefined);
    if (!csv || csv.problems.length) continue;
    const retryId = batchIdFor(csv);
    const started = await batchHandle(client, retryId)
      .describe()
      .then(() => true)
      .catch(() => false);
    if (started)
      found.push({ retry: { batchId: retryId, rows: csv.rows.length }, ids: csv.rows.map((r) => r.id) });
  }
  return found;
}

/**
 * `retry-failed`: a new batch of the rows whose final state in `batchId`'s manifest is failed (optionally only
 * one error code), linked to it; its rows check the jobs the original batch made for them (priorOutDir) before
 * paying again. Undefined when no row qualifies. The caller follows the batch (and runs a worker when no one
 * else does, as `run` does).
 */
export async function retryFailed(
  session: Session,
  batchId: string,
  options: RetryFailedOptions = {},
): Promise<RetryStarted | undefined> {
  const { code, outRoot = 'out', onEarlier, onLeftOut, ...start } = options;
  const manifest = await findManifest(session.client, batchId, outRoot);
  // A row an earlier retry took goes on in that retry (whose folder knows its new job), never paid again here.
  const earlier = await earlierRetries(session.client, dirname(manifest), batchId, code);
  const taken = new Set(earlier.flatMap((e) => e.ids));
  if (earlier.length) onEarlier?.(earlier.map((e) => e.retry));
  // The CSV goes beside the batch's results on this machine; for a batch in the store, into the store too.
  const csv = await failedRowsCsv(manifest, localFolderOf(manifest, outRoot, batchId), batchId, code, taken);
  if (csv.leftOut.length) onLeftOut?.(csv.leftOut);
  if (csv.rows === 0) return undefined;
  if (isStoreUrl(manifest)) {
    const { store, key } = await objectAt(joinStorePath(dirname(manifest), basename(csv.path)));
    await store.upload(key, createReadStream(csv.path), { contentType: 'text/csv' });
  }
  // The retry downloads (under the same root, or not at all) and verifies as the original batch did, unless told.
  const original = (await previousInput(session.client, batchId))?.options;
  const started = await startBatch(session, csv.path, {
    // A batch in the store has its retry there too (startBatch places a new batch in VIDBATCH_STORE).
    ...(isStoreUrl(manifest) ? {} : { outDir: outRoot }),
    ...(original?.downloadDir ? { downloadDir: dirname(original.downloadDir) } : {}),
    ...(original?.download === false ? { download: false } : {}),
    ...(original?.verify ? { verify: original.verify } : {}),
    // A row whose rewrite failed is rewritten again (nothing was kept for it, so a new chat call); rows that
    // were rewritten carry their original prompt in the retry CSV and are sent as they were.
    ...(original?.enhance ? { enhance: original.enhance } : {}),
    ...definedOnly(start),
    retryOf: batchId,
    priorOutDir: dirname(manifest),
  });
  return {
    ...started,
    csvPath: csv.path,
    rows: csv.rows,
    retryOf: batchId,
  };
}
