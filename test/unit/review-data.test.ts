// The review gallery's data and page, without a browser: rows and states from CSV + manifest + journal, the
// export cells, script-safe JSON, and byte ranges of `review --serve` (the browser tests are in
// test/integration/cli-review.test.ts).
import { describe, expect, it } from 'vitest';
import type { PromptResult } from '../../src/contract/prompt';
import { parseCsv } from '../../src/input/csv';
import { csvCells } from '../../src/review/csv-cells';
import { buildReviewData, fileHref } from '../../src/review/data';
import { reviewPage, scriptJson } from '../../src/review/page';
import { byteRange } from '../../src/review/serve';

const CSV = 'prompt,resolution\nfirst,720P\n"second, with ""quotes""",1080P\nthird,720P\n';

function result(over: Partial<PromptResult> & Pick<PromptResult, 'rowId' | 'status'>): PromptResult {
  return {
    line: 2,
    prompt: 'p',
    model: 'm',
    input: {},
    parameters: {},
    attempts: 1,
    polls: 2,
    finishedAt: '2026-01-01T00:00:00.000Z',
    ...over,
  };
}

describe('review data', () => {
  it('csvCells keeps the header and cells, and adds the ids a CSV without an id column gets', () => {
    const cells = csvCells(CSV);
    expect(cells.header).toEqual(['id', 'prompt', 'resolution']);
    expect([...cells.cells]).toEqual([
      ['1', ['1', 'first', '720P']],
      ['2', ['2', 'second, with "quotes"', '1080P']],
      ['3', ['3', 'third', '720P']],
    ]);
    expect(csvCells('id,prompt\na,x\n,y\n').cells.get('2')).toEqual(['2', 'y']);
  });

  it('one row per CSV row: finished from the manifest (last line), submitted from the journal, else waiting', () => {
    const parsed = parseCsv(CSV, 'p.csv');
    const data = buildReviewData(
      {
        batchId: 'batch-x',
        rows: parsed.rows,
        csv: csvCells(CSV),
        manifest: [
          result({ rowId: '1', status: 'succeeded', url: 'https://g/1.mp4', file: '/o/videos/b/1.mp4' }),
          result({
            rowId: '2',
            status: 'failed',
            errorCode: 'content_moderation',
            unknownSubmits: 1,
            ...({ verification: { ok: false, problems: ['height 480, asked 720'] } } as object),
          }),
        ],
        journal: [{ rowId: '3', jobId: 'job-3', generation: 0, at: '2026-01-01T00:00:00Z' }],
      },
      { pageDir: '/o/out/b' },
      {
        estimateCost: (r) => (r.status === 'succeeded' ? 0.5 : undefined),
        ledger: 'jobs made: 3 for 3 rows',
      },
    );
    expect(data.rows.map((r) => [r.id, r.state, r.jobId])).toEqual([
      ['1', 'succeeded', undefined],
      ['2', 'failed', undefined],
      ['3', 'submitted', 'job-3'],
    ]);
    expect(data.rows[0]!.video).toEqual({ src: '../../videos/b/1.mp4', local: true });
    expect(data.rows[1]!.verification?.ok).toBe(false);
    expect(data.rows[1]!.unknownSubmits).toBe(1);
    expect(data.rows[2]!.resolution).toBe('720P');
    expect(data.spend).toBe(0.5);
    expect(data.ledger).toBe('jobs made: 3 for 3 rows');
    expect(data.header).toEqual(['id', 'prompt', 'resolution']);
  });

  it('without the CSV, the manifest rows are the rows, with input-format cells', () => {
    const data = buildReviewData(
      {
        batchId: 'batch-x',
        rows: [],
        manifest: [result({ rowId: 'a', status: 'succeeded', prompt: 'p a', url: 'https://g/a.mp4' })],
        journal: [],
      },
      { pageDir: '/o' },
      {},
      () => false,
    );
    expect(data.header.slice(0, 2)).toEqual(['id', 'prompt']);
    expect(data.rows.map((r) => [r.id, r.cells.slice(0, 2), r.video])).toEqual([
      ['a', ['a', 'p a'], { src: 'https://g/a.mp4', local: false }],
    ]);
  });

  it('a row reused from another batch says from where, and costs this batch nothing', () => {
    const data = buildReviewData(
      {
        batchId: 'batch-x',
        rows: [],
        manifest: [
          result({
            rowId: 'a',
            status: 'succeeded',
            jobId: 'vid_1',
            reusedFrom: { batchId: 'batch-y', rowId: 'r7' },
          }),
          result({ rowId: 'b', status: 'succeeded', jobId: 'vid_2' }),
        ],
        journal: [],
      },
      { pageDir: '/o' },
      { estimateCost: () => 0.5 },
      () => false,
    );
    expect(data.rows.map((r) => [r.id, r.reusedFrom, r.estimatedCost])).toEqual([
      ['a', { batchId: 'batch-y', rowId: 'r7' }, undefined],
      ['b', undefined, 0.5],
    ]);
    expect(data.spend).toBe(0.5);
  });

  it('links a file relative to the page, each path segment encoded', () => {
    expect(fileHref('/a/out/b', '/a/videos/b/x #1?.mp4')).toBe('../../videos/b/x%20%231%3F.mp4');
  });

  it('embeds user text so that it cannot close the script element', async () => {
    expect(scriptJson({ p: '</script><b>\u2028' })).toBe('{"p":"\\u003c/script>\\u003cb>\\u2028"}');
    const html = await reviewPage({
      batchId: 'batch-x',
      generatedAt: '2026-01-01T00:00:00Z',
      header: ['id', 'prompt'],
      rows: [
        {
          id: '1',
          line: 2,
          prompt: '</script><script>alert(1)</script>',
          model: 'm',
          state: 'waiting',
          cells: [],
        },
      ],
    });
    expect(html.match(/<\/script>/g)).toHaveLength(2); // the data's and the page script's own
    expect(html).not.toMatch(/https?:\/\/(?!127)/); // nothing from a network
  });

  it('byteRange reads one range, clamps its end, and refuses one past the end', () => {
    expect(byteRange('bytes=0-9', 100)).toEqual({ start: 0, end: 9 });
    expect(byteRange('bytes=90-', 100)).toEqual({ start: 90, end: 99 });
    expect(byteRange('bytes=-10', 100)).toEqual({ start: 90, end: 99 });
    expect(byteRange('bytes=50-500', 100)).toEqual({ start: 50, end: 99 });
    expect(byteRange('bytes=100-', 100)).toBeNull();
    expect(byteRange(undefined, 100)).toBeUndefined();
    expect(byteRange('bytes=0-1,5-6', 100)).toBeUndefined();
  });
});
