// Strings numbered in the order they were first added, kept as bytes in one buffer with an open-addressing
// table over them: about 8 bytes a string beside its bytes, where a Map of strings costs nearly a hundred.
// The request index holds a row id and a request key for every row of every earlier batch of the root
// (docs/benchmarks.md: a million rows), so this is where its memory goes.

/** How a set turns its strings into bytes and back (exactly: decode(encode(text)) is text). */
export interface Codec {
  /** At most this many bytes for `text`. */
  maxBytes(text: string): number;
  /** Writes `text` at the start of `into`: the number of bytes written. */
  encode(text: string, into: Buffer): number;
  decode(bytes: Buffer, start: number, end: number): string;
}

export const utf8: Codec = {
  maxBytes: (text) => text.length * 3,
  encode: (text, into) => into.write(text),
  decode: (bytes, start, end) => bytes.toString('utf8', start, end),
};

/** FNV-1a over `bytes` from `start` to `end`. */
function fnv1a(bytes: Buffer, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  return h >>> 0;
}

export class StringSet {
  private bytes: Buffer = Buffer.allocUnsafe(1 << 12);
  private used = 0;
  /** Where string n starts in `bytes`; it ends where n + 1 starts. */
  private starts = new Uint32Array(1 << 8);
  /** Open addressing, at most 80% full: each entry is a string's number plus one (0: free). */
  private table = new Int32Array(1 << 9);
  private scratch: Buffer = Buffer.allocUnsafe(256);
  size = 0;

  constructor(private readonly codec: Codec = utf8) {}

  /** The number of `text`, added if it is new. */
  add(text: string): number {
    const { n, at, length } = this.probe(text);
    if (n >= 0) return n;
    if (this.used + length > this.bytes.length)
      this.bytes = copied(this.bytes, this.used, Math.max(this.used + length, this.bytes.length * 1.5));
    this.scratch.copy(this.bytes, this.used, 0, length);
    const added = this.size++;
    if (this.size >= this.starts.length) this.starts = grown(this.starts, this.starts.length * 2);
    this.starts[added] = this.used;
    this.used += length;
    this.starts[added + 1] = this.used;
    this.table[at] = added + 1;
    if (this.size * 5 > this.table.length * 4) this.rehash(this.table.length * 2);
    return added;
  }

  /** The number of `text` (-1: not added). */
  find(text: string): number {
    return this.probe(text).n;
  }

  text(n: number): string {
    return this.codec.decode(this.bytes, this.starts[n]!, this.starts[n + 1]!);
  }

  /** Lets go of the room kept for strings not yet added (a set that will grow again grows as before). */
  trim(): void {
    if (this.bytes.length > this.used) this.bytes = copied(this.bytes, this.used, this.used);
    if (this.starts.length > this.size + 1) this.starts = grown(this.starts, this.size + 1);
  }

  /** `text`'s number (-1: none), the entry it is at or would go to, and its bytes' length in `scratch`. */
  private probe(text: string): { n: number; at: number; length: number } {
    const most = this.codec.maxBytes(text);
    if (most > this.scratch.length) this.scratch = Buffer.allocUnsafe(most);
    const length = this.codec.encode(text, this.scratch);
    const mask = this.table.length - 1;
    for (let at = fnv1a(this.scratch, 0, length) & mask; ; at = (at + 1) & mask) {
      const entry = this.table[at]!;
      if (entry === 0) return { n: -1, at, length };
      const start = this.starts[entry - 1]!;
      const end = this.starts[entry]!;
      if (end - start === length && this.bytes.compare(this.scratch, 0, length, start, end) === 0)
        return { n: entry - 1, at, length };
    }
  }

  private rehash(capacity: number): void {
    const table = new Int32Array(capacity);
    const mask = capacity - 1;
    for (let n = 0; n < this.size; n++) {
      let at = fnv1a(this.bytes, this.starts[n]!, this.starts[n + 1]!) & mask;
      while (table[at] !== 0) at = (at + 1) & mask;
      table[at] = n + 1;
    }
    this.table = table;
  }
}

/** The first `used` bytes of `bytes`, in a buffer of `capacity` bytes. */
function copied(bytes: Buffer, used: number, capacity: number): Buffer {
  const next = Buffer.allocUnsafeSlow(Math.ceil(capacity));
  bytes.copy(next, 0, 0, used);
  return next;
}

type Flat = Uint8Array | Uint16Array | Uint32Array | Int32Array | Float64Array;

/** A copy of `a` with room for `capacity` values (the first `capacity` when it shrinks). */
export function grown<T extends Flat>(a: T, capacity: number): T {
  const b = new (a.constructor as new (n: number) => T)(capacity);
  b.set(a.subarray(0, Math.min(a.length, capacity)));
  return b;
}
