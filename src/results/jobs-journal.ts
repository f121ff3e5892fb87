// The jobs journal: `<outDir>/jobs.jsonl`, one JSON line per job a row's submit made (or may have made), written
// by submitJob the moment it knows. The manifest only learns a job when its row finishes; the journal keeps the
// job ids of rows a cancelled or terminated batch never recorded, so a re-run checks those jobs instead of
// paying again. Append-only and torn-tail safe: a line cut by a crash is skipped, and the next append starts
// on a fresh line instead of gluing onto it.
import { appendFile, mkdir, open } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { logAt } from '../store/object-log';
import { isStoreUrl, joinStorePath } from '../store/store-url';
import { readJsonl } from './jsonl';

export const JOURNAL_FILE = 'jobs.jsonl';

export interface JournalEntry {
  rowId: string;
  /** The job the gateway made; absent with `unknown` (a submit whose outcome was lost). */
  jobId?: string;
  /** Idempotency-key generation of the submit (0: `vidbatch:<batch>:<row>`). */
  generation: number;
  /** The submit's outcome is unknown: it may have created a billed job whose id never reached us. */
  unknown?: true;
  /** The row's request key (input/request-key.ts): other batches in the output root follow this job. */
  request?: string;
  /** Another batch's row paid for `jobId` (it claimed the same request first): this row follows it. */
  followedFrom?: { batchId: string; rowId: string };
  /** The row's line in its CSV: a reader that has passed it lets it go (results/prior.ts). */
  line?: number;
  /** ISO time of the entry. */
  at: string;
  /** What the job was asked for (absent in journals from before the spend ledger): prices it when no manifest line does. */
  model?: string;
  resolution?: string;
  duration?: number;
}

export function journalPath(outDir: string): string {
  return isStoreUrl(outDir) ? joinStorePath(outDir, JOURNAL_FILE) : join(outDir, JOURNAL_FILE);
}

/** Whether the file ends with a newline (true for a missing or empty file). */
async function endsWithNewline(path: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(path, 'r');
  } catch {
    return true;
  }
  try {
    const { size } = await handle.stat();
    if (size === 0) return true;
    const last = Buffer.alloc(1);
    await handle.read(last, 0, 1, size - 1);
    return last[0] === 0x0a;
  } finally {
    await handle.close();
  }
}

/** The waits between tries of a journal write to a store: about 15 s in all, well inside a submit's attempt. */
export const STORE_RETRY_DELAYS_MS = [1_000, 2_000, 4_000, 8_000];

/** Appends in one process go one at a time per file, so the torn-tail check never sees a half-written line. */
const queues = new Map<string, Promise<void>>();

/** Appends one entry to `<outDir>/jobs.jsonl` (creating the folder); resolves once it is written. */
export async function appendJournal(
  outDir: string,
  entry: JournalEntry,
  /** Epoch ms after which a store that is away is no longer waited for. */
  retryUntil = Infinity,
): Promise<void> {
  const path = journalPath(outDir);
  // In a store: one small object per entry, never an append (workers on several machines write at once). The
  // submit's only other record of its job is its result, so a store that is briefly away is waited for (a
  // retry writes the same object), within a bound.
  if (isStoreUrl(outDir)) {
    const log = await logAt<JournalEntry>(path);
    for (const delay of [...STORE_RETRY_DELAYS_MS, undefined]) {
      try {
        await log.append([entry], Date.parse(entry.at));
        return;
      } catch (err) {
        if (delay === undefined || Date.now() + delay > retryUntil) throw err;
        await sleep(delay);
      }
    }
  }
  const previous = queues.get(path) ?? Promise.resolve();
  const mine = previous.then(async () => {
    await mkdir(outDir, { recursive: true });
    // A torn last line (crash mid-append) is left as it is (it may be all there is of a job id) and skipped on
    // reading; this entry starts on a line of its own.
    const prefix = (await endsWithNewline(path)) ? '' : '\n';
    await appendFile(path, `${prefix}${JSON.stringify(entry)}\n`);
  });
  const settled = mine.catch(() => undefined);
  queues.set(path, settled);
  void settled.then(() => {
    if (queues.get(path) === settled) queues.delete(path);
  });
  return mine;
}

/** Every entry of `<outDir>/jobs.jsonl` in file order (none when there is no journal). */
export async function readJournal(outDir: string): Promise<JournalEntry[]> {
  return (await readJsonl<JournalEntry>(journalPath(outDir))).filter(
    (e) => typeof e.rowId === 'string' && typeof e.generation === 'number',
  );
}
