// What `review --serve` tells a page that already has the data: only the rows that changed since the version
// the page holds. A big batch's page would otherwise fetch every row (megabytes of JSON) each time one row
// finished. Rows are compared by a digest of their JSON, so what is kept per row is small.
import { createHash } from 'node:crypto';
import type { ReviewData, ReviewRow } from './data';

/**
 * The page's data at a version (`tag`, which the page sends back as `since`): `rows` are all of them, or with
 * `changedOnly` those changed since the page's version.
 */
export type VersionedData = ReviewData & { tag: string; changedOnly?: true };

export class RowVersions {
  /** The server's start time: a page holding versions from another run of the server gets all rows. */
  private readonly epoch = Date.now();
  private version = 0;
  private readonly seen = new Map<string, { digest: string; version: number }>();
  /** A page older than this version gets all rows: rows went away or changed order since. */
  private reshaped = 0;
  private data: ReviewData | undefined;

  /** Takes a new build of the data; the version moves on when any row changed (or rows went away). */
  update(data: ReviewData): void {
    const next = this.version + 1;
    let changed = !this.data || data.rows.length !== this.seen.size;
    const ids = new Set<string>();
    for (const row of data.rows) {
      ids.add(row.id);
      const digest = createHash('sha1').update(JSON.stringify(row)).digest('base64');
      const before = this.seen.get(row.id);
      if (before?.digest !== digest) {
        this.seen.set(row.id, { digest, version: next });
        changed = true;
      }
    }
    let gone = false;
    for (const id of this.seen.keys())
      if (!ids.has(id)) {
        this.seen.delete(id);
        gone = true;
      }
    if (gone || !sameOrder(this.data, data)) {
      this.reshaped = next;
      changed = true;
    }
    if (changed || header(data) !== header(this.data!)) this.version = next;
    this.data = data;
  }

  /** The current version, as the page holds it. */
  get tag(): string {
    return `${this.epoch}-${this.version}`;
  }

  /** All rows, or those changed after `since` (a tag of this server's). */
  since(since?: string): VersionedData {
    const data = this.data!;
    const m = since ? /^(\d+)-(\d+)$/.exec(since) : null;
    if (!m || Number(m[1]) !== this.epoch || Number(m[2]) > this.version || Number(m[2]) < this.reshaped)
      return { ...data, tag: this.tag };
    const from = Number(m[2]);
    const rows: ReviewRow[] = data.rows.filter((r) => (this.seen.get(r.id)?.version ?? 0) > from);
    return { ...data, rows, tag: this.tag, changedOnly: true };
  }
}

/** The page's data without its rows and build time (ledger, status, times): sent with every answer. */
function header(data: ReviewData): string {
  return JSON.stringify({ ...data, rows: undefined, generatedAt: undefined });
}

/** The rows both builds have are in the same order (new rows may follow). */
function sameOrder(before: ReviewData | undefined, after: ReviewData): boolean {
  if (!before) return true;
  const n = Math.min(before.rows.length, after.rows.length);
  for (let i = 0; i < n; i++) if (before.rows[i]!.id !== after.rows[i]!.id) return false;
  return true;
}
