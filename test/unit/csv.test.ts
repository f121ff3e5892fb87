import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import {
  firstInvalidUtf8,
  loadCsv,
  loadValidCsv,
  MAX_PASS_THROUGH_CELL_BYTES,
  MAX_ROW_BYTES,
  parseCsv,
  suggestColumn,
} from '../../src/input/csv';
import { CsvValidationError } from '../../src/errors';
import { requestHash } from '../../src/input/request-key';
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
      request: `${requestHash(rows[1]!)}/1`,
    });
  });

  it('keys each row by what it sends and its take: identical rows are takes 1, 2, 3; a take column names its own', () => {
    const { rows } = parseCsv(
      'id,prompt,duration,take\na,a fox,5,\nb,a fox,5,\nc,a fox,6,\nd,a fox,5,\ne,a fox,5,redo-1\n',
      'x.csv',
    );
    const hash = requestHash(rows[0]!);
    expect(rows.map((r) => r.request)).toEqual([
      `${hash}/1`,
      `${hash}/2`,
      `${requestHash(rows[2]!)}/1`,
      `${hash}/3`,
      `${hash}/redo-1/1`,
    ]);
    expect(requestHash(rows[2]!)).not.toBe(hash);
    // The id and the line are not part of the request: the same rows in another order are the same requests.
    const moved = parseCsv('prompt,duration\na fox,6\na fox,5\n', 'y.csv').rows;
    expect(moved.map((r) => r.request)).toEqual([`${requestHash(rows[2]!)}/1`, `${hash}/1`]);
    // Key order inside input.* or parameters.* does not matter.
    expect(requestHash({ model: 'm', input: { a: 1, b: 2 }, parameters: {} })).toBe(
      requestHash({ model: 'm', input: { b: 2, a: 1 }, parameters: {} }),
    );
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

describe('bad input, told plainly', () => {
  const bytes = (...parts: (string | number[])[]) =>
    Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));

  it('rejects a file that is not UTF-8 with the line and byte offset of the first bad byte', () => {
    // Latin-1 "café" on line 3: byte 0xE9 at offset 13 ("prompt\nok\ncaf" is 13 bytes).
    const { problems, rows } = parseCsv(bytes('prompt\nok\ncaf', [0xe9], '\n'), 'l1.csv');
    expect(rows).toEqual([]);
    expect(problems).toEqual([expect.objectContaining({ file: 'l1.csv', line: 3, column: '(encoding)' })]);
    expect(problems[0]?.reason).toMatch(/not UTF-8 text: byte 0xE9 at byte offset 13/);
  });

  it('reports a binary file as not text, not as unknown columns', () => {
    const png = bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48]);
    const { problems } = parseCsv(png, 'img.csv');
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ line: 1, column: '(encoding)' });
    const nul = parseCsv(bytes('prompt,x\n', [0], 'abc\n'), 'nul.csv').problems;
    expect(nul).toEqual([expect.objectContaining({ line: 2, column: '(encoding)' })]);
    expect(nul[0]?.reason).toMatch(/not a text file: a NUL byte at byte offset 9/);
    expect(parseCsv(bytes([0xff, 0xfe], 'p'), 'u16.csv').problems[0]?.reason).toMatch(/UTF-16/);
  });

  it('finds the first invalid byte: overlong forms, surrogates, truncated sequences', () => {
    expect(firstInvalidUtf8(Buffer.from('日本 ok é'))).toBe(-1);
    expect(firstInvalidUtf8(Buffer.from([0x61, 0xc0, 0xaf]))).toBe(1); // overlong "/"
    expect(firstInvalidUtf8(Buffer.from([0x61, 0x62, 0xed, 0xa0, 0x80]))).toBe(2); // a surrogate
    expect(firstInvalidUtf8(Buffer.from([0x61, 0xe6, 0x97]))).toBe(1); // cut short
    expect(firstInvalidUtf8(Buffer.from([0xf4, 0x90, 0x80, 0x80]))).toBe(0); // past U+10FFFF
  });

  it('says "prompt is empty" for an empty or blank prompt', () => {
    const { problems } = parseCsv(Buffer.from('id,prompt\n1,\n2,"   "\n3,ok\n'), 'e.csv');
    expect(problems.map((p) => [p.line, p.column, p.reason])).toEqual([
      [2, 'prompt', 'prompt is empty'],
      [3, 'prompt', 'prompt is empty'],
    ]);
  });

  it('suggests the column a header most likely means', () => {
    for (const header of ['text', 'Prompt', 'prompts', 'PROMPT', 'promt', 'caption'])
      expect(suggestColumn(header)).toBe('prompt');
    expect(suggestColumn('modle')).toBe('model');
    expect(suggestColumn('Duration')).toBe('duration');
    expect(suggestColumn('params.seed')).toBe('parameters.seed');
    expect(suggestColumn('colour')).toBeUndefined();
    const { problems } = parseCsv(Buffer.from('id,text\n1,a cat\n'), 'h.csv');
    expect(problems.map((p) => p.reason)).toEqual([
      'required column `prompt` is missing from the header (rename `text` to `prompt`)',
      expect.stringContaining('unknown column: did you mean `prompt`?'),
    ]);
  });

  it('refuses a pass-through cell over 64 KiB and a row over 128 KiB as JSON, naming line, column and size', () => {
    const big = 'y'.repeat(MAX_PASS_THROUGH_CELL_BYTES + 1);
    const cell = parseCsv(Buffer.from(`prompt,input.ref\nok,small\nfine,${big}\n`), 'c.csv');
    expect(cell.problems.map((p) => [p.line, p.column])).toEqual([[3, 'input.ref']]);
    expect(cell.problems[0]?.reason).toBe(
      'cell is 65537 bytes (64.0 KiB), over the limit of 65536 bytes (64.0 KiB)',
    );
    const third = 'z'.repeat(60_000);
    const row = parseCsv(
      Buffer.from(`prompt,input.a,input.b\n${'p'.repeat(19_000)},${third},${third}x\n`),
      'r.csv',
    );
    expect(row.problems).toHaveLength(1);
    expect(row.problems[0]).toMatchObject({ line: 2, column: 'input.b' });
    expect(row.problems[0]?.reason).toMatch(
      /over the limit of 131072 bytes \(128\.0 KiB\); its largest cell is `input\.b`/,
    );
    expect(MAX_ROW_BYTES).toBe(128 * 1024);
  });
});
