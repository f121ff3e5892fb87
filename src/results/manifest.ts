// The manifest: one JSON line per finished prompt in `<outDir>/manifest.jsonl`, append-only. A row's final
// state is its LAST line: a later run of the batch (a re-run after cancel, a retried row) appends the row's new
// outcome after the old one. An append skips records already written (same row, same finishedAt: a retried
// recordResults), and a torn last line (crash mid-write) is cut off before appending, so the file stays
// correct under activity retries and worker crashes.
import { appendFile, mkdir, open, readFile, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { mayArriveLate, replacesState, type PromptResult } from '../contract/prompt';
import { logAt } from '../store/object-log';
import { isStoreUrl, joinStorePath } from '../store/store-url';
import { readJsonl } from './jsonl';
import { summarizeVerification, type VerificationSummary } from './verification-summary';

export const MANIFEST_FILE = 'manifest.jsonl';

export function manifestPath(outDir: string): string {
  return isStoreUrl(outDir) ? joinStorePath(outDir, MANIFEST_FILE) : join(outDir, MANIFEST_FILE);
}

/**
 * What makes two manifest lines the same record: the row, when that outcome was reached and, for a line
 * `vidbatch download` appended (the same outcome with its file), when it fetched the file.
 */
export function recordKey(r: Pick<PromptResult, 'rowId' | 'finishedAt' | 'downloadedAt'>): string {
  return `${r.rowId}\n${r.finishedAt}${r.downloadedAt ? `\n${r.downloadedAt}` : ''}`;
}

/**
 * The final state per row: the last line of each row wins, except the ended line a late video superseded
 * (replacesState). Rows keep the order of their first line.
 */
export function finalStates(records: Iterable<PromptResult>): PromptResult[] {
  const byRow = new Map<string, PromptResult>();
  for (const record of records)
    if (record.rowId !== undefined && replacesState(byRow.get(record.rowId), record))
      byRow.set(record.rowId, record);
  return [...byRow.values()];
}

/** Reads a manifest's final state per row (last line wins); skips a torn or foreign line. */
export async function readManifest(path: string): Promise<PromptResult[]> {
  return finalStates(await readJsonl<PromptResult>(path));
}

/** Cuts an unterminated last line left by a crash mid-append. */
async function repairTail(path: string): Promise<void> {
  let handle;
  try {
    handle = await open(path, 'r');
  } catch {
    return;
  }
  try {
    const { size } = await handle.stat();
    if (size === 0) return;
    const last = Buffer.alloc(1);
    await handle.read(last, 0, 1, size - 1);
    if (last[0] === 0x0a) return;
    const text = await readFile(path, 'utf8');
    await truncate(path, Buffer.byteLength(text.slice(0, text.lastIndexOf('\n') + 1)));
  } finally {
    await handle.close();
  }
}

/**
 * Records known to be in each manifest, valid while the file keeps the size we last saw (else re-read). A few
 * manifests at a time: a long-lived worker serves batch after batch.
 */
const recordedCache = new Map<string, { size: number; records: Set<string> }>();
const RECORDED_CACHE_SIZE = 4;

async function fileSize(path: string): Promise<number> {
  return stat(path).then(
    (s) => s.size,
    () => 0,
  );
}

/** Appends the results not yet in the manifest (by row and finishedAt); returns how many were written. */
export async function appendResults(outDir: string, results: PromptResult[]): Promise<number> {
  if (isStoreUrl(outDir)) {
    // In a store: the group is one object keyed by its latest time and content, so a retried write is the same
    // object, written once.
    const at = Math.max(...results.map((r) => Date.parse(r.downloadedAt ?? r.finishedAt) || 0));
    const log = await logAt<PromptResult>(manifestPath(outDir));
    return (await log.append(results, at)) ? results.length : 0;
  }
  await mkdir(outDir, { recursive: true });
  const path = manifestPath(outDir);
  await repairTail(path);
  let cached = recordedCache.get(path);
  if (!cached || cached.size !== (await fileSize(path))) {
    cached = {
      size: await fileSize(path),
      records: new Set((await readJsonl<PromptResult>(path)).map(recordKey)),
    };
    recordedCache.delete(path);
    if (recordedCache.size >= RECORDED_CACHE_SIZE) recordedCache.delete(recordedCache.keys().next().value!);
    recordedCache.set(path, cached);
  }
  const recorded = cached.records;
  const keys = new Set<string>();
  const fresh = results.filter((r) => {
    const key = recordKey(r);
    return !recorded.has(key) && !keys.has(key) && (keys.add(key), true);
  });
  // The cache learns the records only once they are on disk: a failed append is retried in full.
  if (fresh.length) await appendFile(path, fresh.map((r) => JSON.stringify(r)).join('\n') + '\n');
  for (const key of keys) recorded.add(key);
  cached.size = await fileSize(path);
  return fresh.length;
}

/** A manifest's final state in figures: what `status` shows for a batch that is not running. */
export interface ManifestSummary {
  path: string;
  rows: number;
  succeeded: number;
  failed: number;
  /** Rows whose submits had an unknown outcome: each may have been billed more than once. */
  unknownSubmitRows: number;
  /** Failed rows per error code. */
  failedByCode: Record<string, number>;
  /** Rows whose video arrived after they ended (`arrivedLate`): succeeded now. */
  arrivedLate: number;
  /** Rows that ended `deadline_exceeded` or `cancelled` with a job id: their job may still bring a late video. */
  lateJobs: number;
  /** Downloaded videos checked against their rows. */
  verification: VerificationSummary;
}

export async function summarizeManifest(path: string): Promise<ManifestSummary> {
  const rows = await readManifest(path);
  const failedByCode: Record<string, number> = {};
  for (const r of rows) {
    if (r.status !== 'failed') continue;
    const code = r.errorCode ?? 'unknown';
    failedByCode[code] = (failedByCode[code] ?? 0) + 1;
  }
  return {
    path,
    rows: rows.length,
    succeeded: rows.filter((r) => r.status === 'succeeded').length,
    failed: rows.filter((r) => r.status === 'failed').length,
    unknownSubmitRows: rows.filter((r) => (r.unknownSubmits ?? 0) > 0).length,
    failedByCode,
    arrivedLate: rows.filter((r) => r.arrivedLate && r.status === 'succeeded').length,
    lateJobs: rows.filter(mayArriveLate).length,
    verification: summarizeVerification(rows),
  };
}
