// A log of JSON records in an object store, for records written from many machines (a batch's results, its
// jobs journal) without appending to a shared file: each write is one immutable object
// `<prefix><order>-<hash>.jsonl`, where `order` is a time (ms, zero-padded so keys sort by it) and `hash` comes
// from the content, so a retried write of the same records puts the same bytes at the same key, once.
// Readers take the objects in key order and fold them by row, as they fold a local file's lines.
//
// Compaction keeps a big log to a few objects without losing a write that lands late: parts older than twice
// the lookback are merged with the compacted object into a new `<order>-<hash>-c<n>.jsonl` (order: its newest
// part's; hash: of the names it merges), each part's records under a header naming the part, and what was
// merged is then deleted. A reader takes every compacted object it lists and the parts they do not name, each
// part once, so it reads the same records whether it lists the parts, the compacted object, or both (between
// the upload and the deletes).
import { createHash } from 'node:crypto';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import type { ObjectStore } from './object-store';
import { objectAt } from './open-store';

/** How far behind the newest object a late write may land and still be read (writers' clocks, slow puts). */
export const LOG_LOOKBACK_MS = 5 * 60_000;

const ORDER_DIGITS = 13;
const orderOf = (name: string) => Number(name.slice(0, ORDER_DIGITS));
const pad = (ms: number) => String(Math.max(0, Math.floor(ms))).padStart(ORDER_DIGITS, '0');
/** Objects of a log fetched at once. */
const READ_AHEAD = 16;
const COMPACTED = /^\d{13}-[0-9a-f]{16}-c(\d+)\.jsonl$/;
/** The header of a part's records in a compacted object (no record has this field). */
const PART_FIELD = '$part';

/** An object of a log: its name under the prefix, its order, and for a compacted one how many parts it holds. */
interface LogObject {
  name: string;
  order: number;
  parts?: number;
}

function logObject(key: string, prefix: string): LogObject | undefined {
  const name = key.slice(prefix.length);
  const order = orderOf(name);
  if (!Number.isFinite(order) || name.includes('/')) return undefined;
  const compacted = COMPACTED.exec(name);
  return compacted ? { name, order, parts: Number(compacted[1]) } : { name, order };
}

const headerOf = (name: string) => `${JSON.stringify({ [PART_FIELD]: name })}\n`;

/** The part a compacted object's line starts, if it is a header. */
function headerName(line: string): string | undefined {
  if (!line.startsWith(`{"${PART_FIELD}":`)) return undefined;
  try {
    const name = (JSON.parse(line) as Record<string, unknown>)[PART_FIELD];
    return typeof name === 'string' ? name : undefined;
  } catch {
    return undefined;
  }
}

/** An object's lines, streamed (a compacted object may be large); undefined when there is no object. */
async function linesAt(store: ObjectStore, key: string): Promise<AsyncIterable<string> | undefined> {
  const chunks = await store.stream(key);
  return chunks && createInterface({ input: Readable.from(chunks), crlfDelay: Infinity });
}

/**
 * `read` (or any call) of each key, READ_AHEAD at a time, results given in key order; an error is thrown where
 * it is reached.
 */
async function* inOrder<R>(keys: readonly string[], read: (key: string) => Promise<R>): AsyncGenerator<R> {
  const pending = new Map<number, Promise<R>>();
  const start = (i: number) => {
    if (i >= keys.length) return;
    const p = read(keys[i]!);
    p.catch(() => undefined); // those started ahead of a failure (or of a reader that stops) are let go
    pending.set(i, p);
  };
  for (let i = 0; i < READ_AHEAD; i++) start(i);
  for (let i = 0; i < keys.length; i++) {
    const result = await pending.get(i)!;
    pending.delete(i);
    start(i + READ_AHEAD);
    yield result;
  }
}

const hash16 = (body: string) => createHash('sha256').update(body).digest('hex').slice(0, 16);

async function readText(store: ObjectStore, key: string): Promise<string | undefined> {
  const chunks = await store.stream(key);
  if (!chunks) return undefined;
  const parts: Buffer[] = [];
  for await (const c of chunks) parts.push(Buffer.from(c));
  return Buffer.concat(parts).toString('utf8');
}

/** Each JSON object of a JSON-lines text, in order; a line that is not one (torn, foreign) is skipped. */
export function parseJsonLines<T>(text: string, each: (record: T) => void): void {
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const record = JSON.parse(line) as unknown;
      if (record && typeof record === 'object') each(record as T);
    } catch {
      // a torn line (a crash mid-append), or not ours: the record's writer wrote it again whole
    }
  }
}

export class ObjectLog<T> {
  constructor(
    readonly store: ObjectStore,
    /** Ends in `/`: the log's objects are the keys under it. */
    readonly prefix: string,
  ) {}

  /** The key `records` go to when written at `orderMs`. */
  keyOf(records: readonly T[], orderMs: number): { key: string; body: string } {
    const body = records.map((r) => JSON.stringify(r)).join('\n') + '\n';
    return { key: `${this.prefix}${pad(orderMs)}-${hash16(body)}.jsonl`, body };
  }

  /** Writes `records` as one object; false when the same records were already written at the same time. */
  async append(records: readonly T[], orderMs: number): Promise<boolean> {
    if (!records.length) return false;
    const { key, body } = this.keyOf(records, orderMs);
    return this.store.put(key, body, { ifAbsent: true, contentType: 'application/jsonl' });
  }

  /** Every record, in key order. */
  async readAll(each: (record: T) => void): Promise<void> {
    await new ObjectLogTail<T>(this).read(each);
  }

  /** The log's objects, in key order. */
  async objects(): Promise<LogObject[]> {
    const found: LogObject[] = [];
    for await (const { key } of this.store.list(this.prefix)) {
      const object = logObject(key, this.prefix);
      if (object) found.push(object);
    }
    return found;
  }

  /**
   * Merges the parts older than twice the lookback (no late write can still land among them) and the compacted
   * objects into one compacted object, when there are at least `minParts` such parts and at least half as many
   * as the compacted object holds (so a record is rewritten a few times in a log's life, not once per
   * compaction); then deletes what it merged. Streamed: a log of any size is never held whole. Returns how many
   * parts it merged (0: not due, or another writer was compacting the same parts).
   */
  async compact(nowMs: number, minParts: number): Promise<number> {
    const objects = await this.objects();
    const compacted = objects.filter((o) => o.parts !== undefined);
    const held = Math.max(0, ...compacted.map((o) => o.parts!));
    const cutoff = nowMs - 2 * LOG_LOOKBACK_MS;
    const parts = objects.filter((o) => o.parts === undefined && o.order < cutoff);
    if (!parts.length || parts.length < Math.max(minParts, held / 2)) return 0;
    const { store, prefix } = this;
    // Named by what it merges: two writers compacting the same objects write the same bytes to the same key.
    const merging = [...compacted, ...parts].map((o) => o.name);
    const order = Math.max(...compacted.map((o) => o.order), ...parts.map((o) => o.order));
    const key = `${prefix}${pad(order)}-${hash16(merging.join('\n'))}-c${held + parts.length}.jsonl`;
    // Set when an object merged went missing: the upload fails, however the store wraps the error.
    let gone = false;
    const missing = () => {
      gone = true;
      return new Error('merged by another writer since the listing');
    };
    async function* body(): AsyncGenerator<string> {
      const done = new Set<string>();
      for (const o of compacted) {
        const lines = await linesAt(store, prefix + o.name);
        if (!lines) throw missing();
        let skip = false;
        for await (const line of lines) {
          const name = headerName(line);
          if (name !== undefined) {
            skip = done.has(name);
            done.add(name);
          }
          if (!skip && line) yield `${line}\n`;
        }
      }
      const fresh = parts.filter((p) => !done.has(p.name));
      let i = 0;
      for await (const text of inOrder(
        fresh.map((p) => prefix + p.name),
        (k) => readText(store, k),
      )) {
        if (text === undefined) throw missing();
        yield headerOf(fresh[i++]!.name);
        if (text) yield text.endsWith('\n') ? text : `${text}\n`;
      }
    }
    try {
      await store.upload(key, body(), { contentType: 'application/jsonl' });
    } catch (err) {
      if (gone) return 0;
      throw err;
    }
    // Everything merged is in the new object: the older compacted ones and the parts can go.
    const merged = merging.map((name) => prefix + name).filter((k) => k !== key);
    const deleting = inOrder(merged, (k) => store.delete(k));
    while (!(await deleting.next()).done);
    return parts.length;
  }
}

/**
 * Reads a log incrementally: each `read` gives the records of the objects that appeared since the last, in key
 * order. It lists from a little before the newest object it has read (LOG_LOOKBACK_MS), so a write stamped
 * earlier than that one but put later is still read, once. A compacted object gives the parts it names that
 * this reader has not read (all of them, the first time).
 */
export class ObjectLogTail<T> {
  /** Parts (and compacted objects) read, by name, with their order. */
  private readonly seen = new Map<string, number>();
  private newest = -1;
  /** The last read asked for, settled either way: the next one starts after it. */
  private last: Promise<unknown> = Promise.resolve();

  constructor(readonly log: ObjectLog<T>) {}

  read(each: (record: T) => void): Promise<number> {
    // A read marks objects read only after awaiting the store: two reads at once on a shared tail would list
    // the same unread objects and both give their records. So each read waits for the one before it (failed or
    // not) and then gives only what appeared since.
    const run = this.last.then(() => this.readNext(each));
    this.last = run.catch(() => undefined);
    return run;
  }

  private async readNext(each: (record: T) => void): Promise<number> {
    for (let tries = 1; ; tries++) {
      const read = await this.readOnce(each);
      if (read !== undefined) return read;
      // The compacted object listed was replaced by a newer one before it could be read: list again.
      if (tries === 3)
        throw new Error(
          `${this.log.store.urlOf(this.log.prefix.replace(/\/$/, ''))}: compacted objects kept changing while read`,
        );
    }
  }

  /** Not read yet, and within the lookback of what was read before this listing (`since`; -1: nothing). */
  private fresh(o: { name: string; order: number }, since: number): boolean {
    return !this.seen.has(o.name) && (since < 0 || o.order >= since - LOG_LOOKBACK_MS);
  }

  private mark(o: { name: string; order: number }): void {
    this.seen.set(o.name, o.order);
    this.newest = Math.max(this.newest, o.order);
  }

  private async readOnce(each: (record: T) => void): Promise<number | undefined> {
    const { store, prefix } = this.log;
    const since = this.newest;
    const from = since < 0 ? undefined : `${prefix}${pad(since - LOG_LOOKBACK_MS)}`;
    const listed: LogObject[] = [];
    for await (const { key } of store.list(prefix, from)) {
      const object = logObject(key, prefix);
      if (object && !this.seen.has(object.name)) listed.push(object);
    }
    // Every compacted object listed (normally one; two while a compaction replaces another), each part once,
    // marked read once all its records were given.
    const merged = new Set<string>();
    let count = 0;
    for (const o of listed.filter((o) => o.parts !== undefined)) {
      const lines = await linesAt(store, prefix + o.name);
      if (!lines) return undefined;
      let part: { name: string; order: number } | undefined;
      const done = () => {
        if (part) this.mark(part);
        if (part) count += 1;
        part = undefined;
      };
      for await (const line of lines) {
        const name = headerName(line);
        if (name === undefined) {
          if (part) parseJsonLines(line, each);
          continue;
        }
        done();
        if (merged.has(name)) continue;
        merged.add(name);
        const next = { name, order: orderOf(name) };
        if (this.fresh(next, since)) part = next;
      }
      done();
      this.mark(o);
    }
    // The other parts, fetched several at a time (one small object per job: a cold read of a big batch is many
    // GETs), taken in key order.
    const parts = listed.filter((o) => o.parts === undefined && !merged.has(o.name));
    let i = 0;
    for await (const text of inOrder(
      parts.map((p) => prefix + p.name),
      (k) => readText(store, k),
    )) {
      // Deleted since it was listed: merged into a compacted object. List again before reading past it, so
      // that object is listed and this part read from it.
      if (text === undefined) return undefined;
      parseJsonLines(text, each);
      this.mark(parts[i++]!);
      count += 1;
    }
    // What is out of the lookback is never listed again: forget it.
    for (const [name, order] of this.seen) if (order < this.newest - LOG_LOOKBACK_MS) this.seen.delete(name);
    return count;
  }
}

/** The log a results path names in the store that holds it (`s3://…/<batch>/manifest.jsonl`: its parts under `…/manifest.jsonl/`). */
export async function logAt<T>(url: string): Promise<ObjectLog<T>> {
  const { store, key } = await objectAt(url);
  return new ObjectLog<T>(store, `${key}/`);
}
