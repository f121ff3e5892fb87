import { describe, expect, it } from 'vitest';
import type { ReviewData, ReviewRow } from '../../src/review/data';
import { RowVersions } from '../../src/review/row-versions';

const row = (id: string, state: ReviewRow['state'] = 'waiting'): ReviewRow => ({
  id,
  line: 2,
  prompt: `prompt ${id}`,
  model: 'm',
  state,
  cells: [id],
});
const data = (rows: ReviewRow[], ledger = 'jobs made: 0'): ReviewData => ({
  batchId: 'b',
  generatedAt: new Date().toISOString(),
  ledger,
  header: ['id'],
  rows,
});

describe('RowVersions: what review --serve sends a page that has the data', () => {
  it('sends only the rows changed since the version the page holds, and nothing when none did', () => {
    const v = new RowVersions();
    v.update(data([row('a'), row('b'), row('c')]));
    const first = v.since();
    expect(first.rows.map((r) => r.id)).toEqual(['a', 'b', 'c']);
    expect(first.changedOnly).toBeUndefined();

    v.update(data([row('a'), row('b'), row('c')]));
    expect(v.tag).toBe(first.tag); // rebuilt, nothing changed: the page gets a 304

    v.update(data([row('a'), row('b', 'succeeded'), row('c')], 'jobs made: 1'));
    const second = v.since(first.tag);
    expect(second.changedOnly).toBe(true);
    expect(second.rows).toEqual([row('b', 'succeeded')]);
    expect(second.ledger).toBe('jobs made: 1');

    v.update(data([row('a', 'submitted'), row('b', 'succeeded'), row('c'), row('d')]));
    expect(v.since(second.tag).rows.map((r) => r.id)).toEqual(['a', 'd']);
    // A page two versions behind gets what changed in both.
    expect(v.since(first.tag).rows.map((r) => r.id)).toEqual(['a', 'b', 'd']);
  });

  it('sends every row to a page from another server run, or when rows went away or changed order', () => {
    const v = new RowVersions();
    v.update(data([row('a'), row('b')]));
    const tag = v.since().tag;
    expect(v.since('1-1').changedOnly).toBeUndefined();
    expect(v.since('junk').rows).toHaveLength(2);
    v.update(data([row('b'), row('a')]));
    expect(v.since(tag).changedOnly).toBeUndefined();
    expect(v.since(tag).rows.map((r) => r.id)).toEqual(['b', 'a']);
    const reordered = v.since().tag;
    v.update(data([row('b')]));
    expect(v.since(reordered)).toMatchObject({ rows: [row('b')] });
    expect(v.since(reordered).changedOnly).toBeUndefined();
  });
});
