// A validated CSV's rows as JSON lines (one PromptRow per line, its request key set), so that a worker reads a
// page by byte position instead of parsing and holding the whole CSV: what it holds no longer grows with the
// file. `run` writes the file before the batch starts; a worker that finds it missing (another machine, a
// cleaned folder) writes it from the CSV. Its key comes from the CSV's sha256 and the rewrite settings, so every
// writer writes the same bytes, and each write is whole. It lives in the object store (store/), an output
// root's folder by default, where a page is one ranged read.
import { createHash } from 'node:crypto';
import type { EnhanceOptions } from '../contract/enhance';
import type { PromptRow } from '../contract/rows';
import type { ObjectStore } from '../store/object-store';
import { DEFAULTS, rowDefaults, type CsvProvider } from './csv';
import { requestKeyer } from './request-key';

/** The folder of rows files under an output root (beside the batch folders, which the index never confuses). */
export const ROWS_DIR = '.rows';

/** The first line of a rows file: what it was written from, so a reader never takes another file's rows. */
interface RowsHeader {
  vidbatchRows: 1;
  csvSha256: string;
  rows: number;
}

/**
 * The key of the rows of the CSV with this sha256, keyed for these rewrite settings and the defaults of the
 * provider they were read for (csv.ts rowDefaults): batches of one CSV on two providers have rows of their own.
 * The Model Gateway's defaults add nothing, so its keys are the ones they always were.
 */
export function rowsFileKey(csvSha256: string, enhance?: EnhanceOptions, provider?: CsvProvider): string {
  const settings = enhance
    ? createHash('sha256')
        .update(JSON.stringify([enhance.model, enhance.instructions]))
        .digest('hex')
        .slice(0, 12)
    : 'plain';
  const { model, resolution, duration } = rowDefaults(provider);
  const own =
    model !== DEFAULTS.model || resolution !== DEFAULTS.resolution || duration !== DEFAULTS.duration;
  const filled = own
    ? `-${createHash('sha256')
        .update(JSON.stringify([model, resolution, duration]))
        .digest('hex')
        .slice(0, 12)}`
    : '';
  return `${ROWS_DIR}/${csvSha256.slice(0, 32)}-${settings}${filled}.jsonl`;
}

/**
 * Writes the rows (in file order, as parseCsv returns them) with their request keys for `enhance`; the rows
 * given are not changed. A file already there is replaced whole (readers open it anew for each page).
 */
export async function writeRowsFile(
  store: ObjectStore,
  key: string,
  csvSha256: string,
  rows: readonly PromptRow[],
  enhance?: EnhanceOptions,
): Promise<void> {
  const header: RowsHeader = { vidbatchRows: 1, csvSha256, rows: rows.length };
  const requestKey = requestKeyer(enhance);
  // A megabyte of lines per chunk: an upload in parts, never the whole file as one string.
  function* lines() {
    let chunk = JSON.stringify(header) + '\n';
    for (const row of rows) {
      chunk += JSON.stringify({ ...row, request: requestKey(row) }) + '\n';
      if (chunk.length >= 1 << 20) {
        yield chunk;
        chunk = '';
      }
    }
    yield chunk;
  }
  await store.upload(key, lines(), { contentType: 'application/jsonl' });
}

/** Bytes per read: a ranged GET on S3, so a page of rows is usually one. */
const CHUNK_BYTES = 256 * 1024;
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
    readonly store: ObjectStore,
    readonly key: string,
    readonly csvSha256: string,
  ) {}

  /**
   * Rows `offset` to `offset + limit - 1`; undefined when the file is missing, cut short or holds another
   * CSV's rows.
   */
  async page(offset: number, limit: number): Promise<PromptRow[] | undefined> {
    const file = await this.store.head(this.key);
    if (!file) return undefined;
    const read = (position: number, count: number, passed?: (n: number, at: number) => void) =>
      readLines((at) => this.store.read(this.key, at, CHUNK_BYTES), position, count, passed);
    if (file.etag !== this.stamp) {
      this.starts.clear();
      this.last = { row: -1, at: 0 };
      const first = await read(0, 1);
      const header = parseHeader(first.lines[0]);
      if (header?.csvSha256 !== this.csvSha256) return undefined;
      this.rows = header.rows;
      this.starts.set(0, first.end);
      this.stamp = file.etag;
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
      const skipped = await read(position, offset - from, (n, at) => this.mark(from + n, at));
      position = skipped.end;
    }
    const got = await read(position, count, (n, at) => this.mark(row + n, at));
    row += got.lines.length;
    if (got.lines.length < count) {
      // Cut short (not as written), or gone since: read as missing, so it is written again.
      this.stamp = '';
      return undefined;
    }
    this.last = { row, at: got.end };
    return got.lines.map((line) => JSON.parse(line) as PromptRow);
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
  readChunk: (at: number) => Promise<Buffer | undefined>,
  position: number,
  count: number,
  passed?: (n: number, at: number) => void,
): Promise<{ lines: string[]; end: number }> {
  const lines: string[] = [];
  let pending: Buffer[] = [];
  let at = position;
  let end = position;
  while (lines.length < count) {
    const buffer = await readChunk(at);
    if (!buffer?.length) break;
    let start = 0;
    for (let nl = buffer.indexOf(10, 0); nl !== -1; nl = buffer.indexOf(10, start)) {
      pending.push(buffer.subarray(start, nl));
      lines.push(Buffer.concat(pending).toString('utf8'));
      pending = [];
      start = nl + 1;
      end = at + start;
      if (lines.length === count) break;
      passed?.(lines.length, end);
      if (start >= buffer.length) break;
    }
    if (lines.length < count && start < buffer.length) pending.push(buffer.subarray(start));
    at += buffer.length;
  }
  return { lines, end };
}
