// `retry-failed`: a new batch of the rows of a batch whose final state is failed, linked to it.
import { createReadStream } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Client } from '@temporalio/client';
import { loadCsv, loadCsvFrom } from '../input/csv';
import { objectAt } from '../store/open-store';
import { isStoreUrl, joinStorePath } from '../store/store-url';
import { failedRowsCsv, retryCsvPath, type LeftOut } from '../results/export';
import { batchHandle } from './batch-handle';
import { findManifest, localFolderOf } from './batch-status';
import { batchIdFor, definedOnly, startBatch, type StartBatchOptions, type StartedBatch } from './batches';
import { previousInput } from './rerun';
import type { Session } from './session';
import { batchTarget } from './target';
import type { BatchScope } from './task-queue';
export interface RetryFailedOptions extends StartBatchOptions {
  /** Only rows whose final state failed with this code (e.g. `submit_unknown`, `deadline_exceeded`). */
  code?: string;
  /** Root of the output folders, where the original batch's folder is (default `out`). */
  outRoot?: string;
  /** Told of the earlier retries whose rows are left out (before anything starts, also when nothing does). */
  onEarlier?: (earlier: EarlierRetry[]) => void;
  /** Told of the failed rows a retry without `code` leaves out, by code (export.ts, leftOutReason). */
  onLeftOut?: (leftOut: LeftOut[]) => void;
  /** Told that `retry`, an earlier retry of `of`, has completed: the rows that failed there are retried from it. */
  onChained?: (of: string, retry: string) => void;
}

export interface RetryStarted extends StartedBatch {
  /** The input CSV of the rows taken (in the original batch's folder on this machine) and how many. */
  csvPath: string;
  rows: number;
  /** The batch whose failed rows it took: the one named, or the latest completed retry of it. */
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
  /** The scope retries of it are started in (this process's target, the original's root). */
  scope: BatchScope,
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
    const retryId = batchIdFor(csv, scope, batchId);
    const started = await batchHandle(client, retryId)
      .describe()
      .then(() => true)
      .catch(() => false);
    if (started)
      found.push({ retry: { batchId: retryId, rows: csv.rows.length }, ids: csv.rows.map((r) => r.id) });
  }
  return found;
}

/** How many retries of retries `retry-failed` walks before it gives up (a bound; each is one paid attempt per row). */
const MAX_RETRY_CHAIN = 100;

/**
 * `retry-failed`: a new batch of the rows whose final state in `batchId`'s manifest is failed (optionally only
 * one error code), linked to it; its rows check the jobs the original batch made for them (priorOutDir) before
 * paying again. A retry of it that has completed is where its rows went on: the rows that failed there are
 * retried in turn (a retry of that retry, with its own batch id), so each `retry-failed` of a row that keeps
 * failing pays for it once more. Undefined when no row qualifies. The caller follows the batch (and runs a
 * worker when no one else does, as `run` does).
 */
export async function retryFailed(
  session: Session,
  batchId: string,
  options: RetryFailedOptions = {},
): Promise<RetryStarted | undefined> {
  const { code, outRoot = 'out', onEarlier, onLeftOut, onChained, ...start } = options;
  const target = (await batchTarget(session)).target;
  let current = batchId;
  for (let depth = 0; depth < MAX_RETRY_CHAIN; depth++) {
    const retry = await prepareRetry(session, current, { code, outRoot, target, onEarlier, onLeftOut });
    if (!retry) return undefined;
    const { manifest, csv, retryId } = retry;
    const status = await batchHandle(session.client, retryId)
      .describe()
      .then((d) => d.status.name)
      .catch(() => undefined);
    // Completed: its rows went on there, and the ones that failed again are retried from it.
    if (status === 'COMPLETED') {
      onChained?.(current, retryId);
      current = retryId;
      continue;
    }
    return { ...(await startRetry(session, current, manifest, csv, { outRoot, start })), retryOf: current };
  }
  throw new Error(
    `${batchId}: more than ${MAX_RETRY_CHAIN} retries of retries; retry the latest one by its id`,
  );
}

/** The failed rows of `batchId` a retry takes (its CSV written), and the id of the retry they make. */
async function prepareRetry(
  session: Session,
  batchId: string,
  o: Pick<RetryFailedOptions, 'code' | 'onEarlier' | 'onLeftOut'> & { outRoot: string; target: string },
) {
  const manifest = await findManifest(session.client, batchId, o.outRoot);
  // A row an earlier retry took goes on in that retry (whose folder knows its new job), never paid again here.
  const scope = { target: o.target, root: isStoreUrl(manifest) ? dirname(dirname(manifest)) : o.outRoot };
  const earlier = await earlierRetries(session.client, dirname(manifest), batchId, o.code, scope);
  const taken = new Set(earlier.flatMap((e) => e.ids));
  if (earlier.length) o.onEarlier?.(earlier.map((e) => e.retry));
  // The CSV goes beside the batch's results on this machine; for a batch in the store, into the store too.
  const folder = localFolderOf(manifest, o.outRoot, batchId);
  const csv = await failedRowsCsv(manifest, folder, batchId, o.code, taken);
  if (csv.leftOut.length) o.onLeftOut?.(csv.leftOut);
  if (csv.rows === 0) return undefined;
  const parsed = await loadCsv(csv.path);
  return { manifest, csv, retryId: batchIdFor(parsed, scope, batchId) };
}

/** Starts (or attaches to, or runs again) the retry of `batchId`'s rows in `csv`. */
async function startRetry(
  session: Session,
  batchId: string,
  manifest: string,
  csv: { path: string; rows: number },
  o: { outRoot: string; start: StartBatchOptions },
): Promise<Omit<RetryStarted, 'retryOf'>> {
  if (isStoreUrl(manifest)) {
    const { store, key } = await objectAt(joinStorePath(dirname(manifest), basename(csv.path)));
    await store.upload(key, createReadStream(csv.path), { contentType: 'text/csv' });
  }
  // The retry downloads (under the same root, or not at all) and verifies as the original batch did, unless told.
  const original = (await previousInput(session.client, batchId))?.options;
  const started = await startBatch(session, csv.path, {
    // A batch in the store has its retry there too (startBatch places a new batch in VIDBATCH_STORE).
    ...(isStoreUrl(manifest) ? {} : { outDir: o.outRoot }),
    ...(original?.downloadDir ? { downloadDir: dirname(original.downloadDir) } : {}),
    ...(original?.download === false ? { download: false } : {}),
    ...(original?.verify ? { verify: original.verify } : {}),
    // A row whose rewrite failed is rewritten again (nothing was kept for it, so a new chat call); rows that
    // were rewritten carry their original prompt in the retry CSV and are sent as they were.
    ...(original?.enhance ? { enhance: original.enhance } : {}),
    ...definedOnly(o.start),
    retryOf: batchId,
    priorOutDir: dirname(manifest),
  });
  return { ...started, csvPath: csv.path, rows: csv.rows };
}
