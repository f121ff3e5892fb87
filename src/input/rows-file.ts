// A validated CSV's rows as JSON lines (one PromptRow per line, its request key set), so that a worker reads a
// page by byte position instead of parsing and holding the whole CSV: what it holds no longer grows with the
// file. `run` writes the file before the batch starts; a worker that finds it missing (another machine, a
// cleaned folder) writes it from the CSV. Its name comes from the CSV's sha256 and the rewrite settings, so every
// writer writes the same bytes, and each write is whole (a temporary file, then a rename).
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import type { EnhanceOptions } from '../contract/enhance';
import type { PromptRow } from '../contract/rows';
import { requestKeyer } from './request-key';

/** The folder of rows files under an output root (beside the batch folders, which the index never confuses). */
export const ROWS_DIR = '.rows';

/** The first line of a rows file: what it was written from, so a reader never takes another file's rows. */
interface RowsHeader {
  vidbatchRows: 1;
  csvSha256: string;
  rows: number;
}

/** Where the rows of the CSV with this sha256, keyed for these rewrite settings, live under `root`. */
export function rowsFilePath(root: string, csvSha256: string, enhance?: EnhanceOptions): string {
  const settings = enhance
    ? createHash('sha256')
        .update(JSON.stringify([enhance.model, enhance.instructions]))
        .digest('hex')
        .slice(0, 12)
    : 'plain';
  return join(root, ROWS_DIR, `${csvSha256.slice(0, 32)}-${settings}.jsonl`);
}

/**
 * Writes the rows (in file order, as parseCsv returns them) with their request keys for `enhance`; the rows
 * given are not changed. A file already there is replaced whole (readers open it anew for each page).
 */
export async function writeRowsFile(
  path: string,
  csvSha256: string,
  rows: readonly PromptRow[],
  enhance?: EnhanceOptions,
): Promise<void> {
  await mkdir(join(path, '..'), { recursive: true });
  const tmp = `${path}.${randomUUID()}.tmp`;
  try {
    const out = createWriteStream(tmp);
    const header: RowsHeader = { vidbatchRows: 1, csvSha256, rows: rows.length };
    const key = requestKeyer(enhance);
    const write = (line: string) =>
      out.write(line + '\n') ? undefined : new Promise<void>((r) => out.once('drain', () => r()));
    await write(JSON.stringify(header));
    for (const row of rows) await write(JSON.stringify({ ...row, request: key(row) }));
    out.end();
    await finished(out);
    await rename(tmp, path);
  } finally {
    await rm(tmp, { force: true });
  }
}

const CHUNK_BYTES = 64 * 1024;
/** A reader remembers where every this-many-th row starts, so a page anywhere is found by a short scan. */
const CHECKPOINT_EVERY = 1000;

/**
 * Reads pages of one rows file. It keeps where some rows start (the last page's end, every 1,000th row), so
 * that the next page in order is one read and any other a scan of at most 1,000 lines.
 */
export class RowsFileReader {
  private stamp = '';
  private rows = 0;
  private readonly starts = new Map<number, number>();
  private last = { row: -1, at: 0 };

  constructor(
    readonly path: string,
    readonly csvSha256: string,
  ) {}

  /**
   * Rows `offset` to `offset + limit - 1`; undefined when the file is missing, cut short or holds another
   * CSV's rows.
   */
  async page(offset: number, limit: number): Promise<PromptRow[] | undefined> {
    let handle: FileHandle;
    try {
      handle = await open(this.path, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    try {
      const file = await handle.stat();
      const stamp = `${file.size}/${file.mtimeMs}/${file.ino}`;
      if (stamp !== this.stamp) {
        this.starts.clear();
        this.last = { row: -1, at: 0 };
        const first = await readLines(handle, 0, 1);
        const header = parseHeader(first.lines[0]);
        if (header?.csvSha256 !== this.csvSha256) return undefined;
        this.rows = header.rows;
        this.starts.set(0, first.end);
        this.stamp = stamp;
      }
      const count = Math.min(limit, this.rows - offset);
      if (count <= 0) return [];
      let row = offset;
      let position = offset === this.last.row ? this.last.at : this.starts.get(offset);
      if (position === undefined) {
        // Scan on from the nearest known start before it.
        let from = 0;
        for (const known of this.starts.keys()) if (known <= offset && known > from) from = known;
        position = this.starts.get(from)!;
        const skipped = await readLines(handle, position, offset - from, (n, at) => this.mark(from + n, at));
        position = skipped.end;
      }
      const read = await readLines(handle, position, count, (n, at) => this.mark(row + n, at));
      row += read.lines.length;
      if (read.lines.length < count) {
        // Cut short (not as written): read as missing, so it is written again.
        this.stamp = '';
        return undefined;
      }
      this.last = { row, at: read.end };
      return read.lines.map((line) => JSON.parse(line) as PromptRow);
    } finally {
      await handle.close();
    }
  }

  private mark(row: number, at: number) {
    if (row % CHECKPOINT_EVERY === 0) this.starts.set(row, at);
  }
}

function parseHeader(line: string | undefined): RowsHeader | undefined {
  try {
    const header = JSON.parse(line ?? '') as Partial<RowsHeader>;
    return header.vidbatchRows === 1 &&
      typeof header.csvSha256 === 'string' &&
      typeof header.rows === 'number'
      ? (header as RowsHeader)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Up to `count` whole lines from byte `position`, and the byte after the last; `passed(n, at)` is told where
 * each line after the first starts (n lines in).
 */
async function readLines(
  handle: FileHandle,
  position: number,
  count: number,
  passed?: (n: number, at: number) => void,
): Promise<{ lines: string[]; end: number }> {
  const lines: string[] = [];
  let pending: Buffer[] = [];
  let at = position;
  let end = position;
  const buffer = Buffer.alloc(CHUNK_BYTES);
  while (lines.length < count) {
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, at);
    if (bytesRead === 0) break;
    let start = 0;
    for (let nl = buffer.indexOf(10, 0); nl !== -1 && nl < bytesRead; nl = buffer.indexOf(10, start)) {
      pending.push(Buffer.from(buffer.subarray(start, nl)));
      lines.push(Buffer.concat(pending).toString('utf8'));
      pending = [];
      start = nl + 1;
      end = at + start;
      if (lines.length === count) break;
      passed?.(lines.length, end);
      if (start >= bytesRead) break;
    }
    if (lines.length < count && start < bytesRead)
      pending.push(Buffer.from(buffer.subarray(start, bytesRead)));
    at += bytesRead;
  }
  return { lines, end };
}
