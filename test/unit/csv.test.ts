import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { loadCsv, loadValidCsv, parseCsv } from '../../src/input/csv';
import { CsvValidationError } from '../../src/errors';
import { vbenchPrompts, writeVbenchCsv } from '../../bench/vbench';

describe('parseCsv', () => {
  it('handles BOM, CRLF, quoted commas, quotes and newlines inside prompts', () => {
    const text = '\uFEFFid,prompt\r\na,"multi\r\nline, with ""quotes"""\r\nb,plain\r\n\r\nc,"last, one"';
    const { rows, problems } = parseCsv(text, 'x.csv');
    expect(problems).toEqual([]);
    expect(rows.map((r) => [r.id, r.line, r.prompt])).toEqual([
      ['a', 2, 'multi\r\nline, with "quotes"'],
      ['b', 4, 'plain'],
      ['c', 6, 'last, one'],
    ]);
  });

  it('fills defaults: id = row number, model, resolution 720P, duration 5', () => {
    const { rows } = parseCsv('prompt\nfirst\nsecond\n', 'x.csv');
    expect(rows[1]).toEqual({
      id: '2',
      line: 3,
      prompt: 'second',
      model: 'modelfamily-1.0-r2v',
      input: { prompt: 'second' },
      parameters: { resolution: '720P', duration: 5 },
    });
  });

  it('passes input.<field> and parameters.<field> columns into the request, parsing JSON-looking values', () => {
    const text =
      'prompt,model,resolution,duration,input.reference_images,parameters.seed,parameters.style\n' +
      'a cat,modelfamily-1.1-r2v,1080p,8,"[""https://x/cat.png""]",42,anime\n';
    const [row] = parseCsv(text, 'x.csv').rows;
    expect(row?.model).toBe('modelfamily-1.1-r2v');
    expect(row?.input).toEqual({ prompt: 'a cat', reference_images: ['https://x/cat.png'] });
    expect(row?.parameters).toEqual({ resolution: '1080P', duration: 8, seed: 42, style: 'anime' });
  });

  it('reports every bad row at once with file, line, column and reason', () => {
    const text = [
      'id,prompt,duration,resolution',
      '1,ok,5,720P',
      '2,,5,720P', // empty prompt
      '3,fine,five,720P', // bad duration
      '1,dup,5,720P', // duplicate id
      '4,"too",5,720P,extra', // extra column
      '5,bad res,5,big',
    ].join('\n');
    const { problems, rows } = parseCsv(text, 'in.csv');
    expect(problems.map((p) => [p.line, p.column])).toEqual([
      [3, 'prompt'],
      [4, 'duration'],
      [5, 'id'],
      [6, '(row)'],
      [7, 'resolution'],
    ]);
    expect(problems.every((p) => p.file === 'in.csv' && p.reason.length > 5)).toBe(true);
    expect(problems[2]?.reason).toContain('first used on line 2');
    expect(rows.map((r) => r.id)).toEqual(['1']);
  });

  it('rejects a header without prompt, unknown columns, and an empty file', () => {
    expect(parseCsv('id,promt\n1,a\n', 'x.csv').problems.map((p) => p.column)).toEqual(['prompt', 'promt']);
    expect(parseCsv('', 'x.csv').problems[0]?.reason).toMatch(/empty/);
    expect(parseCsv('prompt\n', 'x.csv').problems[0]?.reason).toMatch(/no rows/);
  });

  it('reports an unclosed quote', () => {
    const { problems } = parseCsv('prompt\nok\n"never closed\n', 'x.csv');
    expect(problems).toHaveLength(1);
    expect(problems[0]?.reason).toMatch(/Quote Not Closed/i);
  });

  it('reads UTF-8 prompts (Chinese VBench) and long prompts with commas and quotes', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-csv-'));
    for (const list of ['all_dimension_cn', 'all_dimension_longer'] as const) {
      const path = join(dir, `${list}.csv`);
      const written = await writeVbenchCsv(path, 200, list);
      const { rows, problems } = await loadCsv(path);
      expect(problems).toEqual([]);
      expect(rows.map((r) => r.prompt)).toEqual(written.map((w) => w[1]));
    }
    expect((await vbenchPrompts('all_dimension_cn'))[0]).toMatch(/[\u4e00-\u9fff]/);
  });

  it('loadValidCsv throws a CsvValidationError whose message names file, line and column', async () => {
    const path = join(await mkdtemp(join(tmpdir(), 'vidbatch-csv-')), 'bad.csv');
    await writeFile(path, 'prompt,duration\nok,0\n');
    const error = await loadValidCsv(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CsvValidationError);
    expect((error as Error).message).toContain(`${path}:2 [duration]`);
  });

  it('agrees with csv-parse on a round trip of 946 real prompts', async () => {
    const path = join(await mkdtemp(join(tmpdir(), 'vidbatch-csv-')), 'all.csv');
    await writeVbenchCsv(path, 946);
    const { rows } = await loadCsv(path);
    const reference = parse<{ prompt: string }>(await readFile(path), { columns: true });
    expect(rows.map((r) => r.prompt)).toEqual(reference.map((r) => r.prompt));
  });
});
