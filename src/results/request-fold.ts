// What the output root's request index keeps of one batch folder, for as long as a worker uses the root, kept
// small (docs/benchmarks.md: ten earlier batches of 100,000 rows): per row only what a lookup decides on
// (status, error code, key generation, unknown outcomes) in flat arrays, status and codes interned, beside its
// row id and request key; its job id and the video it kept (URL, file, sha256, verification), needed only for a
// row a lookup offers, go to a spill file on the worker's disk, deleted as soon as it is opened, and are read
// back by position.
import { closeSync, mkdirSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { isContentRefusal, JOB_GONE_CODE, type PromptResult } from '../contract/prompt';
import type { JournalEntry } from './jobs-journal';
import type { RecordFold } from './prior';
import { grown, StringSet, utf8, type Codec } from './string-set';

/**
 * Error codes of rows whose job may still end with a video: vidbatch stopped waiting for it, or lost its
 * URL. Another batch follows such a job (checks it first) before paying.
 */
export const FOLLOW_CODES: ReadonlySet<string> = new Set([
  'cancelled',
  'deadline_exceeded',
  'workflow_failed',
  'check_failed',
  'poll_failed',
  'url_expired',
]);

/** How the index files a row whose job was stopped at the provider: neither followed nor settled. */
const STOPPED_JOB = 'job_stopped';

/** A succeeded row's job and video, as a batch that reuses it records them. */
export type KeptVideo = Pick<
  PromptResult,
  'jobId' | 'url' | 'generation' | 'submittedAt' | 'file' | 'sha256' | 'bytes' | 'verification'
>;

/** What the output root's request index learns of a row: its request key and its state after the new lines. */
export interface RowView {
  rowId: string;
  request?: string;
  status?: PromptResult['status'];
  errorCode?: string;
  jobId?: string;
  jobGeneration: number;
  unknownSubmits: number;
  kept?: KeptVideo;
}

/** Where an earlier batch's row stands for a request. */
export interface RequestSource {
  batchId: string;
  rowId: string;
  view: RowView;
}

/**
 * What the index offers a row: a video to reuse, a job to follow, an outcome paying again would not change
 * (refused for its content, or a job the gateway forgot), or earlier unknown outcomes to count.
 */
export interface Reuse {
  kept?: RequestSource;
  follow?: RequestSource;
  settled?: RequestSource;
  unknownSubmits: number;
}

/** Rows that ended this way are not paid for again by accident, from this file or another (`retry-failed --code`). */
export const settledCode = (code: string | undefined) => code === JOB_GONE_CODE || isContentRefusal(code);

/** Closes the spill file of an index nobody holds any more. */
const unclosed = new FinalizationRegistry<{ fd?: number }>((file) => {
  if (file.fd !== undefined) closeSync(file.fd);
});

/** Where a text went in the spill. */
interface Spilled {
  at: number;
  length: number;
}

/**
 * Texts the index needs back only for the rows a lookup offers (job ids, kept videos as JSON), in a file on
 * this worker's disk, deleted once opened (it goes when the process or the index does), each read back by its
 * position. Writes are buffered, 1 MiB at a time.
 */
export class Spill {
  private readonly file: { fd?: number } = {};
  /** Bytes in the file; `buffer` holds the next `used` bytes. */
  private written = 0;
  private readonly buffer = Buffer.allocUnsafe(1 << 20);
  private used = 0;
  closed = false;

  constructor(private readonly dir: string) {
    unclosed.register(this, this.file, this);
  }

  /** Where `text` went (undefined: the file could not be written, the caller keeps it itself). */
  put(text: string): Spilled | undefined {
    if (this.closed) return undefined;
    const length = Buffer.byteLength(text);
    try {
      if (this.used + length > this.buffer.length) this.flush();
      const at = this.written + this.used;
      if (length > this.buffer.length) {
        writeSync(this.open(), text, at);
        this.written += length;
      } else this.used += this.buffer.write(text, this.used);
      return { at, length };
    } catch {
      return undefined;
    }
  }

  /** The text put at `at` (undefined: it cannot be read back, or the spill was closed). */
  get(at: number, length: number): string | undefined {
    if (this.closed) return undefined;
    try {
      if (at >= this.written)
        return this.buffer.toString('utf8', at - this.written, at - this.written + length);
      const bytes = Buffer.alloc(length);
      if (readSync(this.open(), bytes, 0, length, at) !== length) return undefined;
      return bytes.toString('utf8');
    } catch {
      return undefined;
    }
  }

  close(): void {
    this.closed = true;
    if (this.file.fd !== undefined) closeSync(this.file.fd);
    this.file.fd = undefined;
    unclosed.unregister(this);
  }

  private flush(): void {
    if (!this.used) return;
    writeSync(this.open(), this.buffer, 0, this.used, this.written);
    this.written += this.used;
    this.used = 0;
  }

  private open(): number {
    if (this.file.fd === undefined) {
      mkdirSync(this.dir, { recursive: true });
      const path = join(this.dir, `.request-index-${process.pid}-${randomUUID()}.spill`);
      this.file.fd = openSync(path, 'w+', 0o600);
      unlinkSync(path);
    }
    return this.file.fd;
  }
}

/** Values a row holds one of (statuses, error codes), each kept once: a row holds its number (up to 254). */
export class Interned {
  private readonly values: unknown[] = [undefined];
  private readonly numbers = new Map<unknown, number>([[undefined, 0]]);

  /** The value's number; undefined once there are too many (the caller keeps the value itself). */
  of(value: unknown): number | undefined {
    let n = this.numbers.get(value);
    if (n === undefined) {
      if (this.values.length > 0xfe) return undefined;
      n = this.values.push(value) - 1;
      this.numbers.set(value, n);
    }
    return n;
  }

  value(n: number): unknown {
    return this.values[n];
  }
}

/** A request key as input/request-key.ts makes it: 24 hex characters of a hash, then `/` and the rest. */
const HASHED = /^[0-9a-f]{24}\//;

/** Request keys in bytes: a made one in 13 bytes and its rest (a hand-edited one as it is, after a 0). */
const requestKeys: Codec = {
  maxBytes: (text) => 1 + utf8.maxBytes(text),
  encode(text, into) {
    if (!HASHED.test(text)) {
      into[0] = 0;
      return 1 + into.write(text, 1);
    }
    into[0] = 1;
    into.write(text.slice(0, 24), 1, 'hex');
    return 13 + into.write(text.slice(25), 13);
  },
  decode: (bytes, start, end) =>
    bytes[start] === 0
      ? bytes.toString('utf8', start + 1, end)
      : `${bytes.toString('hex', start + 1, start + 13)}/${bytes.toString('utf8', start + 13, end)}`,
};

/** A spill position: none. */
const NONE = -1;
/** A spill position: the spill could not take it, the fold holds it in `here`. */
const HERE = -2;
/** An interned value: past Interned's numbers, held in the fold's `here`. */
const UNINTERNED = 0xff;

/**
 * One batch folder's rows as the index sees them: the part of PriorFold (results/prior.ts) a lookup decides
 * on, each row a slot of flat arrays (about 30 bytes, beside its row id and request key), its job id and kept
 * video in the spill.
 */
export class RequestFold implements RecordFold {
  /** Row ids: a row's slot is its id's number. */
  private readonly rowIds = new StringSet();
  /** Request keys, each kept once; `requestOf` a row's latest (its number, -1: none). */
  private readonly requests = new StringSet(requestKeys);
  private requestOf = new Int32Array(0);
  /** Each request key's number to the slot of the first row that mentioned it; `moreRows`, any other (a hand edit). */
  private firstRow = new Int32Array(0);
  private readonly moreRows = new Map<number, number[]>();
  private size = 0;
  private status = new Uint8Array(0);
  private errorCode = new Uint8Array(0);
  /** Generation of the row's latest job (-1: none), and the job id's place in the spill. */
  private jobGeneration = new Int32Array(0);
  private jobAt = new Float64Array(0);
  private jobLength = new Uint16Array(0);
  /** Unknown outcomes as the manifest's final state counts them, and as the journal does. */
  private manifestUnknown = new Uint8Array(0);
  private journalUnknown = new Uint8Array(0);
  /** The last succeeded line's video, as JSON: its place in the spill. */
  private keptAt = new Float64Array(0);
  private keptLength = new Uint32Array(0);
  /** What the spill or the interned values could not take, by slot and field (rare: a disk error). */
  private here?: Map<string, unknown>;

  constructor(
    private readonly spill: Spill,
    private readonly codes: Interned,
  ) {}

  private slot(rowId: string): number {
    const slot = this.rowIds.add(rowId);
    if (slot < this.size) return slot;
    this.size = slot + 1;
    if (slot >= this.status.length) this.grow(Math.max(1024, slot * 2));
    this.requestOf[slot] = -1;
    this.jobGeneration[slot] = -1;
    this.jobAt[slot] = NONE;
    this.keptAt[slot] = NONE;
    return slot;
  }

  /** Lets go of the room kept for rows not yet read (a folder that gains rows grows again). */
  trim(): void {
    if (this.status.length > this.size) this.grow(this.size);
    if (this.firstRow.length > this.requests.size) this.firstRow = grown(this.firstRow, this.requests.size);
    this.rowIds.trim();
    this.requests.trim();
  }

  private grow(capacity: number): void {
    this.requestOf = grown(this.requestOf, capacity);
    this.status = grown(this.status, capacity);
    this.errorCode = grown(this.errorCode, capacity);
    this.jobGeneration = grown(this.jobGeneration, capacity);
    this.jobAt = grown(this.jobAt, capacity);
    this.jobLength = grown(this.jobLength, capacity);
    this.manifestUnknown = grown(this.manifestUnknown, capacity);
    this.journalUnknown = grown(this.journalUnknown, capacity);
    this.keptAt = grown(this.keptAt, capacity);
    this.keptLength = grown(this.keptLength, capacity);
  }

  private keepHere(slot: number, field: string, value: unknown): void {
    (this.here ??= new Map()).set(`${slot}/${field}`, value);
  }

  private fromHere(slot: number, field: string): unknown {
    return this.here?.get(`${slot}/${field}`);
  }

  private intern(codes: Uint8Array, slot: number, field: string, value: unknown): void {
    const n = this.codes.of(value);
    codes[slot] = n ?? UNINTERNED;
    if (n === undefined) this.keepHere(slot, field, value);
  }

  private interned(codes: Uint8Array, slot: number, field: string): unknown {
    const n = codes[slot]!;
    return n === UNINTERNED ? this.fromHere(slot, field) : this.codes.value(n);
  }

  /** `text` in the spill (or here): its position. */
  private put(slot: number, field: string, text: string): Spilled {
    const spilled = this.spill.put(text);
    if (spilled) return spilled;
    this.keepHere(slot, field, text);
    return { at: HERE, length: 0 };
  }

  private text(slot: number, field: string, at: number, length: number): string | undefined {
    if (at === NONE) return undefined;
    if (at === HERE) return this.fromHere(slot, field) as string | undefined;
    return this.spill.get(at, length);
  }

  /** A record names the row's request key: the row is found by it (the same string is kept once). */
  private mention(request: unknown, slot: number): void {
    if (typeof request !== 'string') return;
    const known = this.requests.size;
    const n = this.requests.add(request);
    if (n >= this.firstRow.length) this.firstRow = grown(this.firstRow, Math.max(1024, n * 2));
    if (n === known) this.firstRow[n] = slot;
    if (request) this.requestOf[slot] = n;
    if (this.firstRow[n] !== slot) {
      const more = this.moreRows.get(n) ?? [];
      if (!more.includes(slot)) this.moreRows.set(n, [...more, slot]);
    }
  }

  private job(slot: number, jobId: string, generation: number): void {
    if (generation < this.jobGeneration[slot]!) return;
    this.jobGeneration[slot] = generation;
    const { at, length } = this.put(slot, 'job', jobId);
    this.jobAt[slot] = at;
    this.jobLength[slot] = length;
  }

  private unknowns(n: unknown): number {
    return Math.min(Number(n) || 0, 0xff);
  }

  /** A manifest line: as PriorFold.record, with the video another batch would reuse. */
  record(r: PromptResult): void {
    if (typeof r.rowId !== 'string') return;
    const slot = this.slot(r.rowId);
    const generation = r.generation ?? 0;
    this.intern(this.status, slot, 'status', r.status);
    // A job stopped at the provider makes no video: another batch pays for its own rather than follow it.
    const code = r.jobStop === 'stopped' ? STOPPED_JOB : r.errorCode;
    this.intern(this.errorCode, slot, 'errorCode', r.status === 'failed' ? code : undefined);
    if (r.jobId) this.job(slot, r.jobId, generation);
    this.manifestUnknown[slot] = this.unknowns(r.unknownSubmits);
    this.mention(r.request, slot);
    this.keptAt[slot] = NONE;
    if (r.status !== 'succeeded' || !r.jobId) return;
    const kept: KeptVideo = {
      jobId: r.jobId,
      ...(r.url ? { url: r.url } : {}),
      generation,
      ...(r.submittedAt ? { submittedAt: r.submittedAt } : {}),
      ...(r.file ? { file: r.file, sha256: r.sha256, bytes: r.bytes } : {}),
      ...(r.verification ? { verification: r.verification } : {}),
    };
    const { at, length } = this.put(slot, 'kept', JSON.stringify(kept));
    this.keptAt[slot] = at;
    this.keptLength[slot] = length;
  }

  /** A journal line: as PriorFold.entry (a job made, or an unknown outcome). */
  entry(e: JournalEntry): void {
    if (typeof e.rowId !== 'string' || typeof e.generation !== 'number') return;
    const slot = this.slot(e.rowId);
    if (e.jobId) this.job(slot, e.jobId, e.generation);
    if (e.unknown) this.journalUnknown[slot] = this.unknowns(this.journalUnknown[slot]! + 1);
    this.mention(e.request, slot);
  }

  /** The rows that mentioned `request` whose latest key it still is. */
  rowsOf(request: string): number[] {
    const n = this.requests.find(request);
    if (n < 0) return [];
    const rows = [this.firstRow[n]!, ...(this.moreRows.get(n) ?? [])];
    return rows.filter((slot) => this.requestOf[slot] === n);
  }

  statusOf(slot: number): PromptResult['status'] | undefined {
    return this.interned(this.status, slot, 'status') as PromptResult['status'] | undefined;
  }

  errorCodeOf(slot: number): string | undefined {
    return this.interned(this.errorCode, slot, 'errorCode') as string | undefined;
  }

  hasJob(slot: number): boolean {
    return this.jobAt[slot] !== NONE;
  }

  /** The row's latest job (undefined: none, or the spill can no longer give it back). */
  jobIdOf(slot: number): string | undefined {
    return this.text(slot, 'job', this.jobAt[slot]!, this.jobLength[slot]!);
  }

  unknownOf(slot: number): number {
    return Math.max(this.manifestUnknown[slot]!, this.journalUnknown[slot]!);
  }

  hasKept(slot: number): boolean {
    return this.keptAt[slot] !== NONE;
  }

  /** The row's kept video (undefined: none, or the spill can no longer give it back). */
  keptOf(slot: number): KeptVideo | undefined {
    const json = this.text(slot, 'kept', this.keptAt[slot]!, this.keptLength[slot]!);
    return json === undefined ? undefined : (JSON.parse(json) as KeptVideo);
  }

  /** The row as a lookup offers it, with its video when it kept one (`kept`, read by keptOf). */
  view(slot: number, jobId: string | undefined, kept?: KeptVideo): RowView {
    const n = this.requestOf[slot]!;
    const request = n < 0 ? undefined : this.requests.text(n);
    const status = this.statusOf(slot);
    const errorCode = this.errorCodeOf(slot);
    return {
      rowId: this.rowIds.text(slot),
      ...(request ? { request } : {}),
      ...(status ? { status } : {}),
      ...(errorCode ? { errorCode } : {}),
      ...(jobId ? { jobId } : {}),
      jobGeneration: this.jobGeneration[slot]!,
      unknownSubmits: this.unknownOf(slot),
      ...(kept ? { kept } : {}),
    };
  }
}
