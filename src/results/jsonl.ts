// JSON-lines files that only grow (the manifest, the jobs journal): reads that skip a torn last line (a crash
// mid-append), and a tail reader that parses only what was appended since its last read. Files are read a chunk
// at a time, so one of any size is never held as one string (V8 refuses strings past 512 MiB). A path that is
// a store URL names an object log instead (store/object-log.ts), read the same way.
import { open } from 'node:fs/promises';
import { logAt, ObjectLogTail, parseJsonLines } from '../store/object-log';
import { isStoreUrl } from '../store/store-url';

const CHUNK_BYTES = 1024 * 1024;

/** The records of a JSON-lines file, in file order; a missing file has none, torn or foreign lines are skipped. */
export async function readJsonl<T>(path: string): Promise<T[]> {
  const records: T[] = [];
  await new JsonlTail<T>(path).read((r) => records.push(r));
  return records;
}

/**
 * Reads a growing JSON-lines file incrementally: each `read()` gives the complete lines appended since the
 * last one. A file that shrank (its torn tail was cut) is read again from the start (`reset` is true).
 */
export class JsonlTail<T> {
  private offset = 0;
  private objects: Promise<ObjectLogTail<T>> | undefined;
  /** The last read asked for, settled either way: the next one starts after it. */
  private last: Promise<unknown> = Promise.resolve();

  constructor(readonly path: string) {}

  /** The new records, in file order, to `each` (as they are read), else in `records`. */
  read(each?: (record: T) => void): Promise<{ records: T[]; reset: boolean }> {
    // One tail may be shared by concurrent callers (activities reading one folder through a cache), and a read
    // moves `offset` on only after awaiting the file: two reads at once would start from the same offset and
    // both move it on, giving a region twice or skipping one. So each read waits for the one before it (failed
    // or not) and then gives only what was appended since.
    const run = this.last.then(() => this.readNext(each));
    this.last = run.catch(() => undefined);
    return run;
  }

  private async readNext(each?: (record: T) => void): Promise<{ records: T[]; reset: boolean }> {
    const records: T[] = [];
    const take = each ?? ((r: T) => void records.push(r));
    if (isStoreUrl(this.path)) {
      this.objects ??= logAt<T>(this.path).then((log) => new ObjectLogTail(log));
      await (await this.objects).read(take);
      return { records, reset: false };
    }
    let handle;
    try {
      handle = await open(this.path, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        const reset = this.offset > 0;
        this.offset = 0;
        return { records, reset };
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
      let carried = Buffer.alloc(0);
      while (this.offset + carried.length < size) {
        const chunk = Buffer.alloc(Math.min(CHUNK_BYTES, size - this.offset - carried.length));
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, this.offset + carried.length);
        if (bytesRead === 0) break;
        const buffer = carried.length
          ? Buffer.concat([carried, chunk.subarray(0, bytesRead)])
          : chunk.subarray(0, bytesRead);
        // Only complete lines: a line still being written (or torn) is read once it ends.
        const end = buffer.lastIndexOf(0x0a);
        if (end < 0) {
          carried = buffer;
          continue;
        }
        parseJsonLines<T>(buffer.subarray(0, end + 1).toString('utf8'), take);
        this.offset += end + 1;
        carried = buffer.subarray(end + 1);
      }
      return { records, reset };
    } finally {
      await handle.close();
    }
  }
}
