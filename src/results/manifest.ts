// The manifest: one JSON line per finished prompt in `<outDir>/manifest.jsonl`, append-only. A retried
// append skips rows already written, and a torn last line (crash mid-write) is cut off before appending,
// so the file stays correct under activity retries and worker crashes.
import { appendFile, mkdir, open, readFile, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import type { PromptResult } from '../contract/types';

export const MANIFEST_FILE = 'manifest.jsonl';

export function manifestPath(outDir: string): string {
  return join(outDir, MANIFEST_FILE);
}

/** Reads a manifest; skips a torn or foreign line, and keeps the first record of each row. */
export async function readManifest(path: string): Promise<PromptResult[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const byRow = new Map<string, PromptResult>();
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const record = JSON.parse(line) as PromptResult;
      if (record.rowId !== undefined && !byRow.has(record.rowId)) byRow.set(record.rowId, record);
    } catch {
      // a torn line from a crash mid-append; the retry wrote the record again
    }
  }
  return [...byRow.values()];
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

/** Rows known to be in each manifest, valid while the file keeps the size we last saw (else re-read). */
const recordedCache = new Map<string, { size: number; rows: Set<string> }>();

async function fileSize(path: string): Promise<number> {
  return stat(path).then(
    (s) => s.size,
    () => 0,
  );
}

/** Appends the results not yet in the manifest; returns how many were written. */
export async function appendResults(outDir: string, results: PromptResult[]): Promise<number> {
  await mkdir(outDir, { recursive: true });
  const path = manifestPath(outDir);
  await repairTail(path);
  let cached = recordedCache.get(path);
  if (!cached || cached.size !== (await fileSize(path))) {
    cached = { size: await fileSize(path), rows: new Set((await readManifest(path)).map((r) => r.rowId)) };
    recordedCache.set(path, cached);
  }
  const recorded = cached.rows;
  const fresh = results.filter((r) => !recorded.has(r.rowId) && (recorded.add(r.rowId), true));
  if (fresh.length) await appendFile(path, fresh.map((r) => JSON.stringify(r)).join('\n') + '\n');
  cached.size = await fileSize(path);
  return fresh.length;
}
