// JSON-lines files that only grow (the manifest, the jobs journal): whole-file reads that skip a torn last line
// (a crash mid-append), and a tail reader that parses only what was appended since its last read.
import { open, readFile } from 'node:fs/promises';

/** The records of a JSON-lines file, in file order; a missing file has none, torn or foreign lines are skipped. */
export async function readJsonl<T>(path: string): Promise<T[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return parseLines<T>(text);
}

function parseLines<T>(text: string): T[] {
  const records: T[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const record = JSON.parse(line) as unknown;
      if (record && typeof record === 'object') records.push(record as T);
    } catch {
      // a torn line from a crash mid-append: the retry wrote the record again
    }
  }
  return records;
}

/**
 * Reads a growing JSON-lines file incrementally: each `read()` returns the complete lines appended since the
 * last one. A file that shrank (its torn tail was cut) is read again from the start (`reset` is true).
 */
export class JsonlTail<T> {
  private offset = 0;

  constructor(readonly path: string) {}

  async read(): Promise<{ records: T[]; reset: boolean }> {
    let handle;
    try {
      handle = await open(this.path, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        const reset = this.offset > 0;
        this.offset = 0;
        return { records: [], reset };
      }
      throw err;
    }
    try {
      const { size } = await handle.stat();
      let reset = false;
      if (size < this.offset) {
        this.offset = 0;
        reset = true;
      }
      if (size === this.offset) return { records: [], reset };
      const buffer = Buffer.alloc(size - this.offset);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, this.offset);
      // Only complete lines: a line still being written (or torn) is read once it ends.
      const end = buffer.subarray(0, bytesRead).lastIndexOf(0x0a);
      if (end < 0) return { records: [], reset };
      this.offset += end + 1;
      return { records: parseLines<T>(buffer.subarray(0, end + 1).toString('utf8')), reset };
    } finally {
      await handle.close();
    }
  }
}
