import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createRowActivities } from '../../src/activities/rows';
import { csvFileSha256, loadCsv } from '../../src/input/csv';
import { assignRequestKeys } from '../../src/input/request-key';
import { RowsFileReader, rowsFileKey, writeRowsFile } from '../../src/input/rows-file';
import { LocalStore } from '../../src/store/local-store';

const enhance = { model: 'chat-1', instructions: 'rewrite it' };

/** 2,500 rows with repeated prompts (takes), a multi-line quoted cell and a BOM. */
async function bigCsv() {
  const dir = await mkdtemp(join(tmpdir(), 'vidbatch-rows-file-'));
  const path = join(dir, 'in.csv');
  const lines = ['\uFEFFprompt,original_prompt,input.seed'];
  for (let i = 0; i < 2500; i++) {
    const prompt = i % 7 === 0 ? 'the same prompt' : i === 1234 ? '"two\nlines, quoted"' : `prompt ${i} é`;
    lines.push(`${prompt},${i % 5 === 0 ? 'before' : ''},${i}`);
  }
  await writeFile(path, lines.join('\r\n') + '\r\n');
  return { dir, path, csv: await loadCsv(path) };
}

describe('rows file', () => {
  it('gives the rows parseCsv gives, with their request keys, for any page', async () => {
    const { dir, csv } = await bigCsv();
    expect(csv.problems).toEqual([]);
    for (const settings of [undefined, enhance]) {
      const expected = structuredClone(csv.rows);
      if (settings) assignRequestKeys(expected, settings);
      const store = new LocalStore(join(dir, 'out'));
      const key = rowsFileKey(csv.sha256, settings);
      await writeRowsFile(store, key, csv.sha256, csv.rows, settings);
      const reader = new RowsFileReader(store, key, csv.sha256);
      // In order across the checkpoints, then out of order (another worker took the pages between).
      const pages: PromptRowsPage[] = [];
      for (let offset = 0; offset < 2500; offset += 333) pages.push([offset, await reader.page(offset, 333)]);
      for (const offset of [2400, 999, 1000, 1001, 0, 1234, 2499, 1998])
        pages.push([offset, await reader.page(offset, 100)]);
      // A fresh reader (a worker that started mid-batch) finds a page without the earlier ones.
      pages.push([2222, await new RowsFileReader(store, key, csv.sha256).page(2222, 50)]);
      for (const [offset, rows] of pages) expect(rows).toEqual(expected.slice(offset, offset + rows!.length));
      expect(pages.reduce((n, [, rows]) => n + rows!.length, 0)).toBe(2500 + 701 + 50);
      expect(await reader.page(2500, 100)).toEqual([]);
    }
    // The rows given are not changed by writing them with other keys.
    expect(csv.rows).toEqual((await loadCsv(join(dir, 'in.csv'))).rows);
  });

  it("is not read for another CSV's rows, nor when it is missing", async () => {
    const { dir, csv } = await bigCsv();
    const store = new LocalStore(dir);
    const key = rowsFileKey(csv.sha256);
    expect(await new RowsFileReader(store, key, csv.sha256).page(0, 10)).toBeUndefined();
    await writeRowsFile(store, key, csv.sha256, csv.rows);
    expect(await new RowsFileReader(store, key, 'f'.repeat(64)).page(0, 10)).toBeUndefined();
  });

  it('hashes a CSV as the ingest does, with and without a byte-order mark', async () => {
    const { path, csv } = await bigCsv();
    expect(await csvFileSha256(path)).toBe(csv.sha256);
    const plain = join(path, '..', 'plain.csv');
    await writeFile(plain, (await readFile(path)).subarray(3));
    expect(await csvFileSha256(plain)).toBe(csv.sha256);
  });
});

type PromptRowsPage = [number, Awaited<ReturnType<RowsFileReader['page']>>];

describe('readRows from the rows file', () => {
  it('writes the rows file from the CSV when it is missing, and reads pages from it after', async () => {
    const { dir, path, csv } = await bigCsv();
    const out = join(dir, 'out');
    const activities = createRowActivities(out);
    const input = { csvPath: path, csvSha256: csv.sha256, limit: 100, batchId: 'batch-0000000000000001' };
    expect((await activities.readRows({ ...input, offset: 0 })).map((r) => r.id)).toEqual(
      csv.rows.slice(0, 100).map((r) => r.id),
    );
    const file = join(out, rowsFileKey(csv.sha256));
    expect((await readFile(file, 'utf8')).split('\n')).toHaveLength(2502);
    // Deleted mid-batch (a cleaned folder): written again, and the next page is the same as before.
    await rm(file);
    const page = await activities.readRows({ ...input, offset: 2450 });
    expect(page).toEqual(csv.rows.slice(2450));
    // Cut short (a disk that filled up, a copy that stopped): written again too.
    const whole = await readFile(file, 'utf8');
    await writeFile(file, whole.slice(0, whole.length / 2));
    expect(await activities.readRows({ ...input, offset: 2000 })).toEqual(csv.rows.slice(2000, 2100));
    expect(await readFile(file, 'utf8')).toBe(whole);
    // The CSV edited: the page is refused, not read from the rows file written before.
    await writeFile(path, 'prompt\nsomething else\n');
    await expect(activities.readRows({ ...input, offset: 100 })).rejects.toThrow(
      /changed since the batch started/,
    );
  });
});
