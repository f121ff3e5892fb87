// CSV ingest: csv-parse for the format (BOM, CRLF, quotes, multi-line fields), zod for each row. Every
// problem is collected with its line and column, so one run of `vidbatch validate` shows them all.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { parse } from 'csv-parse/sync';
import { z } from 'zod';
import { CsvValidationError, type CsvProblem } from '../errors';
import { DEFAULT_MODEL, type PromptRow } from '../contract/rows';
import { assignRequestKeys } from './request-key';
import { restoreFormula } from './csv-formula';

const KNOWN_COLUMNS = ['id', 'prompt', 'original_prompt', 'model', 'resolution', 'duration', 'take'];
const PASS_THROUGH = /^(input|parameters)\.([A-Za-z_][\w-]*)$/;
/** Headers people use for the prompt in other tools. */
const PROMPT_ALIASES = ['text', 'prompts', 'caption', 'description', 'query', 'input'];

/** Temporal carries rows in activity results and workflow inputs: a row must stay well under its payload limits. */
export const MAX_ROW_BYTES = 128 * 1024;
export const MAX_PASS_THROUGH_CELL_BYTES = 64 * 1024;

export const DEFAULTS = { model: DEFAULT_MODEL, resolution: '720P', duration: 5 } as const;

const rowSchema = z.object({
  id: z
    .string()
    .max(128, 'must be at most 128 characters')
    .regex(/^[^\s/\\]*$/, 'must not contain spaces or slashes')
    .optional(),
  // An empty cell is dropped before parsing, so "missing" and "blank" both mean an empty prompt.
  prompt: z
    .string({ error: 'prompt is empty' })
    .refine((p) => p.trim().length > 0, 'prompt is empty')
    .refine((p) => p.length <= 20_000, 'must be at most 20000 characters'),
  // The prompt before its rewrite (`plan --enhance` writes it): the row is sent as `prompt` says, never rewritten.
  original_prompt: z
    .string()
    .refine((p) => p.length <= 20_000, 'must be at most 20000 characters')
    .optional(),
  model: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/, 'must be a model id such as modelfamily-1.0-r2v')
    .optional(),
  resolution: z
    .string()
    .regex(/^\d{3,4}[pP]$/, 'must look like 720P')
    .transform((r) => r.toUpperCase())
    .optional(),
  duration: z
    .string()
    .regex(/^\d+$/, 'must be a whole number of seconds')
    .transform(Number)
    .refine((d) => d >= 1 && d <= 600, 'must be between 1 and 600 seconds')
    .optional(),
  take: z
    .string()
    .max(64, 'must be at most 64 characters')
    .regex(/^[^\s/\\]*$/, 'must not contain spaces or slashes')
    .optional(),
});

export interface ParsedCsv {
  file: string;
  sha256: string;
  rows: PromptRow[];
  problems: CsvProblem[];
}

export function sha256(text: string | Buffer): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Pass-through cells: JSON-looking values (numbers, booleans, arrays, objects) are parsed, the rest kept as text. */
function passThroughValue(raw: string): unknown {
  if (/^(-?\d+(\.\d+)?|true|false|null)$/.test(raw) || /^[[{]/.test(raw)) {
    try {
      return JSON.parse(raw) as unknown;
    } catch {
      return raw;
    }
  }
  return raw;
}

/** The byte offset of the first byte that is not valid UTF-8, or -1. */
export function firstInvalidUtf8(buf: Uint8Array): number {
  let i = 0;
  while (i < buf.length) {
    const b = buf[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    const n = b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : 0;
    if (n === 0 || i + n >= buf.length) return i; // not a lead byte, or cut short by the end of the file
    for (let k = 1; k <= n; k++) if (((buf[i + k] ?? 0) & 0xc0) !== 0x80) return i;
    const next = buf[i + 1]!;
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
    if ((b === 0xe0 && next < 0xa0) || (b === 0xed && next >= 0xa0)) return i;
    if ((b === 0xf0 && next < 0x90) || (b === 0xf4 && next >= 0x90)) return i;
    i += n + 1;
  }
  return -1;
}

/** Why these bytes are not a UTF-8 text file (with line and byte offset), or undefined when they are. */
function notUtf8Text(buf: Buffer, file: string): CsvProblem | undefined {
  const lineAt = (offset: number) => {
    let line = 1;
    for (let i = buf.indexOf(10); i !== -1 && i < offset; i = buf.indexOf(10, i + 1)) line++;
    return line;
  };
  if ((buf[0] === 0xff && buf[1] === 0xfe) || (buf[0] === 0xfe && buf[1] === 0xff))
    return {
      file,
      line: 1,
      column: '(encoding)',
      reason: 'the file is UTF-16 text, not UTF-8: save it as UTF-8 ("CSV UTF-8" in spreadsheet programs)',
    };
  let invalid = -1;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(buf);
  } catch {
    invalid = firstInvalidUtf8(buf);
  }
  const nul = buf.indexOf(0);
  if (nul !== -1 && (invalid === -1 || nul < invalid))
    return {
      file,
      line: lineAt(nul),
      column: '(encoding)',
      reason: `not a text file: a NUL byte at byte offset ${nul}; expected a UTF-8 CSV file`,
    };
  if (invalid !== -1)
    return {
      file,
      line: lineAt(invalid),
      column: '(encoding)',
      reason: `not UTF-8 text: byte 0x${buf[invalid]!.toString(16).toUpperCase().padStart(2, '0')} at byte offset ${invalid} is not valid UTF-8; save the file as UTF-8 ("CSV UTF-8" in spreadsheet programs)`,
    };
  return undefined;
}

/** Levenshtein distance, for "did you mean" on header names. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++)
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/** The known column an unknown header most likely means, if any. */
export function suggestColumn(name: string): string | undefined {
  const lower = name.toLowerCase().trim();
  if (KNOWN_COLUMNS.includes(lower)) return lower; // Prompt, ID, Model...
  if (PROMPT_ALIASES.includes(lower)) return 'prompt';
  const pass = /^(inputs?|params?|parameters?)[._](.+)$/i.exec(name);
  if (pass) return `${/^inp/i.test(pass[1]!) ? 'input' : 'parameters'}.${pass[2]}`;
  let best: { column: string; d: number } | undefined;
  for (const column of KNOWN_COLUMNS) {
    const d = distance(lower, column);
    if (!best || d < best.d) best = { column, d };
  }
  return best && best.d <= (best.column.length >= 5 ? 2 : 1) ? best.column : undefined;
}

/** Maps each raw record to the line it starts on, by finding it in the text in order (csv-parse's own count is off for CRLF inside quotes). */
function lineLocator(text: string) {
  const newlines: number[] = [];
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) newlines.push(i);
  let offset = 0;
  return (raw: string): number => {
    const body = raw.replace(/^[\r\n]+/, '').replace(/[\r\n]+$/, '');
    const at = body ? text.indexOf(body, offset) : -1;
    if (at === -1) return 0;
    offset = at + body.length;
    let lo = 0;
    let hi = newlines.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((newlines[mid] ?? 0) < at) lo = mid + 1;
      else hi = mid;
    }
    return lo + 1;
  };
}

/** Problems of the header row: a missing `prompt` column, repeated or unknown columns, shadowed fields. */
function checkHeader(
  header: string[],
  problem: (line: number, column: string, reason: string) => void,
): void {
  if (header.length && !header.includes('prompt')) {
    const meant = header.find((h) => suggestColumn(h) === 'prompt');
    problem(
      1,
      'prompt',
      `required column \`prompt\` is missing from the header${meant ? ` (rename \`${meant}\` to \`prompt\`)` : ''}`,
    );
  }
  const seenHeader = new Set<string>();
  for (const name of header) {
    if (seenHeader.has(name)) problem(1, name, 'column appears twice in the header');
    seenHeader.add(name);
    if (!KNOWN_COLUMNS.includes(name) && !PASS_THROUGH.test(name)) {
      const meant = suggestColumn(name);
      problem(
        1,
        name,
        `unknown column${meant ? `: did you mean \`${meant}\`?` : ''} (expected ${KNOWN_COLUMNS.join(', ')}, input.<field> or parameters.<field>)`,
      );
    }
  }
  for (const shadowed of ['input.prompt', 'parameters.resolution', 'parameters.duration']) {
    if (seenHeader.has(shadowed))
      problem(1, shadowed, `use the \`${shadowed.split('.')[1]}\` column instead`);
  }
}

export function parseCsv(content: string | Buffer, file: string): ParsedCsv {
  if (typeof content !== 'string') {
    // Decoding would turn bad bytes into U+FFFD silently, and a binary file into "columns" of garbage.
    const encoding = notUtf8Text(content, file);
    if (encoding) return { file, sha256: sha256(content), rows: [], problems: [encoding] };
  }
  const text = (typeof content === 'string' ? content : content.toString('utf8')).replace(/^\uFEFF/, '');
  const problems: CsvProblem[] = [];
  const problem = (line: number, column: string, reason: string) =>
    problems.push({ file, line, column, reason });
  // Kept and skipped records each come in file order, but interleave: one cursor each.
  const locate = lineLocator(text);
  const locateSkipped = lineLocator(text);
  let header: string[] = [];
  let headerProblems = false;
  const rows: PromptRow[] = [];
  const ids = new Map<string, number>();
  let index = 0;
  // Each record becomes its row as it is parsed (none are kept): a big file is held once, as text and rows.
  const toRow = ({ record, raw }: { record: Record<string, string>; raw: string }) => {
    const at = index++;
    const line = locate(raw);
    if (headerProblems) return;
    // A cell vidbatch exported as `'=…` (formula neutralised) is read as `=…`, the text it was.
    const cells = Object.fromEntries(
      Object.entries(record)
        .map(([k, v]) => [k, restoreFormula(v)] as const)
        .filter(([, v]) => v !== ''),
    );
    const parsed = rowSchema.safeParse(cells);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) problem(line, String(issue.path[0] ?? '(row)'), issue.message);
      return;
    }
    const id = parsed.data.id ?? String(at + 1);
    const earlier = ids.get(id);
    if (earlier !== undefined) {
      problem(line, 'id', `duplicate id "${id}" (first used on line ${earlier})`);
      return;
    }
    ids.set(id, line);
    const input: Record<string, unknown> = { prompt: parsed.data.prompt };
    const parameters: Record<string, unknown> = {
      resolution: parsed.data.resolution ?? DEFAULTS.resolution,
      duration: parsed.data.duration ?? DEFAULTS.duration,
    };
    for (const [column, value] of Object.entries(cells)) {
      const m = PASS_THROUGH.exec(column);
      if (m?.[2]) (m[1] === 'input' ? input : parameters)[m[2]] = passThroughValue(value);
    }
    const row: PromptRow = {
      id,
      line,
      prompt: parsed.data.prompt,
      ...(parsed.data.original_prompt !== undefined ? { originalPrompt: parsed.data.original_prompt } : {}),
      model: parsed.data.model ?? DEFAULTS.model,
      input,
      parameters,
      ...(parsed.data.take ? { take: parsed.data.take } : {}),
    };
    if (tooLarge(row, cells, line, problem)) return;
    rows.push(row);
  };

  try {
    parse(text, {
      columns: (names: string[]) => {
        header = names.map((n) => n.trim());
        const before = problems.length;
        checkHeader(header, problem);
        headerProblems = problems.length > before;
        return header;
      },
      raw: true,
      skip_empty_lines: true,
      skip_records_with_error: true,
      on_record: (record: { record: Record<string, string>; raw: string }) => {
        toRow(record);
        return null;
      },
      on_skip: (err, raw) => {
        const line = (raw ? locateSkipped(raw) : 0) || Number(err?.lines ?? 0);
        problem(
          line,
          err?.code === 'CSV_RECORD_INCONSISTENT_COLUMNS' ? '(row)' : '(format)',
          err?.message ?? 'unreadable row',
        );
      },
    });
  } catch (err) {
    const e = err as { message: string; lines?: number };
    problem(e.lines ?? 1, '(format)', e.message);
  }
  if (!text.trim()) problem(1, '(file)', 'the file is empty; expected a header row with a `prompt` column');
  if (headerProblems) return { file, sha256: sha256(text), rows: [], problems };
  if (!problems.length && rows.length === 0) problem(2, '(file)', 'the file has a header but no rows');
  assignRequestKeys(rows);
  problems.sort((a, b) => a.line - b.line);
  return { file, sha256: sha256(text), rows, problems };
}

/** Rows travel through Temporal (activity results, workflow inputs): refuse one too large to carry. */
function tooLarge(
  row: PromptRow,
  cells: Record<string, string>,
  line: number,
  problem: (line: number, column: string, reason: string) => void,
): boolean {
  let found = false;
  const sizes = Object.entries(cells).map(([column, value]) => ({ column, bytes: Buffer.byteLength(value) }));
  for (const { column, bytes } of sizes) {
    if (PASS_THROUGH.test(column) && bytes > MAX_PASS_THROUGH_CELL_BYTES) {
      problem(line, column, `cell is ${kib(bytes)}, over the limit of ${kib(MAX_PASS_THROUGH_CELL_BYTES)}`);
      found = true;
    }
  }
  const rowBytes = Buffer.byteLength(JSON.stringify(row));
  if (!found && rowBytes > MAX_ROW_BYTES) {
    const largest = sizes.sort((a, b) => b.bytes - a.bytes)[0];
    problem(
      line,
      largest?.column ?? '(row)',
      `row is ${kib(rowBytes)} as JSON, over the limit of ${kib(MAX_ROW_BYTES)}; its largest cell is \`${largest?.column}\` (${kib(largest?.bytes ?? 0)})`,
    );
    found = true;
  }
  return found;
}

/** "65537 bytes (64.0 KiB)": exact, and readable. */
const kib = (bytes: number) => `${bytes} bytes (${(bytes / 1024).toFixed(1)} KiB)`;

export async function loadCsv(path: string): Promise<ParsedCsv> {
  return parseCsv(await readFile(path), path);
}

/** Loads and validates; throws CsvValidationError listing every problem. */
export async function loadValidCsv(path: string): Promise<ParsedCsv> {
  const parsed = await loadCsv(path);
  if (parsed.problems.length) throw new CsvValidationError(parsed.problems);
  return parsed;
}
