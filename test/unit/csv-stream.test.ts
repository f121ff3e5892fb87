import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCsv, parseCsv } from '../../src/input/csv';

// Files read a few bytes at a time must give what the whole content gives: rows, lines, problems (with their
// lines and byte offsets), sha256. Small chunks split multi-byte characters, CRLF pairs, quoted fields and the
// byte-order mark. The files are well-formed CSV (csv-parse may word a quoting error differently by chunk),
// with rows of the wrong length, bad cells, and bytes that are not UTF-8 text.
const PLAIN = ['a', 'b c', 'é', '日本', '😀', '=1+1', '', 'x'.repeat(40), '720P', '7'];
const QUOTED = ['"q,\nz"', '"x ""y"""', '"😀\r\n日本"'];
const HEADERS = [
  'id,prompt',
  'prompt',
  'prompt,model',
  'id,prompt,input.seed',
  'promt,id',
  '\uFEFFprompt,take',
];

function* files(count: number): Generator<Buffer> {
  let seed = 7;
  // mulberry32: a small seeded generator, so the files are the same on every run.
  const pick = (n: number) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
  for (let i = 0; i < count; i++) {
    const header = HEADERS[pick(HEADERS.length)]!;
    const columns = header.split(',').length;
    const eol = pick(2) ? '\r\n' : '\n';
    let text = header + eol;
    for (let rows = pick(12); rows > 0; rows--) {
      const fields = Array.from({ length: pick(6) ? columns : 1 + pick(3) }, () =>
        pick(4) ? PLAIN[pick(PLAIN.length)]! : QUOTED[pick(QUOTED.length)]!,
      );
      text += fields.join(',') + eol + (pick(8) ? '' : eol);
    }
    const bytes = Buffer.from(text);
    const damage = pick(12);
    if (damage === 0) bytes[pick(bytes.length)] = 0xff; // not UTF-8
    if (damage === 1) bytes[pick(bytes.length)] = 0; // not text
    yield damage === 2 ? Buffer.concat([bytes, Buffer.from([0xe6, 0x97])]) : bytes; // ends inside a character
  }
}

describe('loadCsv reads a file a chunk at a time', () => {
  it('gives what parseCsv gives for the whole content, whatever the chunk size', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-csv-stream-'));
    const path = join(dir, 'in.csv');
    let compared = 0;
    let withRows = 0;
    let encoding = 0;
    let malformed = 0;
    for (const bytes of files(150)) {
      const whole = parseCsv(bytes, path);
      await writeFile(path, bytes);
      for (const chunk of [1, 3, 7, 64]) {
        expect(await loadCsv(path, chunk)).toEqual(whole);
        compared++;
      }
      if (whole.rows.length) withRows++;
      if (whole.problems.some((p) => p.column === '(format)')) malformed++;
      if (whole.problems.some((p) => p.column === '(encoding)')) encoding++;
    }
    // The generated files cover both outcomes, and the encoding problems.
    expect(compared).toBe(600);
    expect(withRows).toBeGreaterThan(30);
    expect(encoding).toBeGreaterThan(20);
    expect(malformed).toBe(0);
  });
});
