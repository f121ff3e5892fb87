// A log of JSON records in an object store, for records written from many machines (a batch's results, its
// jobs journal) without appending to a shared file: each write is one immutable object
// `<prefix><order>-<hash>.jsonl`, where `order` is a time (ms, zero-padded so keys sort by it) and `hash` comes
// from the content, so a retried write of the same records puts the same bytes at the same key, once.
// Readers take the objects in key order and fold them by row, as they fold a local file's lines.
import { createHash } from 'node:crypto';
import type { ObjectStore } from './object-store';
import { objectAt } from './open-store';

/** How far behind the newest object a late write may land and still be read (writers' clocks, slow puts). */
export const LOG_LOOKBACK_MS = 5 * 60_000;

const ORDER_DIGITS = 13;
const orderOf = (key: string, prefix: string) =>
  Number(key.slice(prefix.length, prefix.length + ORDER_DIGITS));
const pad = (ms: number) => String(Math.max(0, Math.floor(ms))).padStart(ORDER_DIGITS, '0');

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
    const hash = createHash('sha256').update(body).digest('hex').slice(0, 16);
    return { key: `${this.prefix}${pad(orderMs)}-${hash}.jsonl`, body };
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
}

/**
 * Reads a log incrementally: each `read` gives the records of the objects that appeared since the last, in key
 * order. It lists from a little before the newest object it has read (LOG_LOOKBACK_MS), so a write stamped
 * earlier than that one but put later is still read, once.
 */
export class ObjectLogTail<T> {
  private readonly seen = new Map<string, number>();
  private newest = -1;

  constructor(readonly log: ObjectLog<T>) {}

  async read(each: (record: T) => void): Promise<number> {
    const { store, prefix } = this.log;
    const from = this.newest < 0 ? undefined : `${prefix}${pad(this.newest - LOG_LOOKBACK_MS)}`;
    const fresh: string[] = [];
    for await (const { key } of store.list(prefix, from)) {
      const order = orderOf(key, prefix);
      if (!Number.isFinite(order) || this.seen.has(key)) continue;
      fresh.push(key);
    }
    for (const key of fresh) {
      const chunks = await store.stream(key);
      if (!chunks) continue; // deleted since it was listed
      const parts: Buffer[] = [];
      for await (const c of chunks) parts.push(Buffer.from(c));
      parseJsonLines(Buffer.concat(parts).toString('utf8'), each);
      const order = orderOf(key, prefix);
      this.seen.set(key, order);
      this.newest = Math.max(this.newest, order);
    }
    // What is out of the lookback is never listed again: forget it.
    for (const [key, order] of this.seen) if (order < this.newest - LOG_LOOKBACK_MS) this.seen.delete(key);
    return fresh.length;
  }
}

/** The log a results path names in the store that holds it (`s3://…/<batch>/manifest.jsonl`: its parts under `…/manifest.jsonl/`). */
export async function logAt<T>(url: string): Promise<ObjectLog<T>> {
  const { store, key } = await objectAt(url);
  return new ObjectLog<T>(store, `${key}/`);
}
