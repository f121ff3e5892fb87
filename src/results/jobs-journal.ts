// The jobs journal `<outDir>/jobs.jsonl`: one line per job id a submit learned, and per submit whose outcome
// was unknown, written by the submit activity as soon as it knows, so a re-run finds every job it paid for
// even when the row never reached the manifest. Minimal version (helper A); helper B owns this module.
import { appendFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';

export interface JournalEntry {
  rowId: string;
  jobId?: string;
  /** Generation of the Idempotency-Key the submit carried. */
  generation: number;
  /** The submit's outcome was unknown: a job may exist that no one knows the id of. */
  unknown?: true;
  /** ISO time of the entry. */
  at: string;
}

export function journalPath(outDir: string): string {
  return join(outDir, 'jobs.jsonl');
}

/** Appends one entry as a JSON line (a single write, so concurrent appends do not interleave). */
export async function appendJournal(outDir: string, entry: JournalEntry): Promise<void> {
  await mkdir(outDir, { recursive: true });
  await appendFile(journalPath(outDir), `${JSON.stringify(entry)}\n`);
}
