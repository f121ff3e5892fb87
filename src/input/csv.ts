// CSV ingest: csv-parse for the format (BOM, CRLF, quotes, multi-line fields), zod for each row. Every
// problem is collected with its line and column, so one run of `vidbatch validate` shows them all.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { parse } from 'csv-parse/sync';
import { z } from 'zod';
import { CsvValidationError, type CsvProblem } from '../errors';
import { DEFAULT_MODEL, type PromptRow } from '../contract/types';

const KNOWN_COLUMNS = ['id', 'prompt', 'model', 'resolution', 'duration'];
const PASS_THROUGH = /^(input|parameters)\.([A-Za-z_][\w-]*)$/;

export const DEFAULTS = { model: DEFAULT_MODEL, resolution: '720P', duration: 5 } as const;

const rowSchema = z.object({
  id: z
    .string()
    .max(128, 'must be at most 128 characters')
    .regex(/^[^\s/\\]*$/, 'must not contain spaces or slashes')
    .optional(),
  prompt: z
    .string()
    .refine((p) => p.trim().length > 0, 'is required and must not be empty')
    .refine((p) => p.length <= 20_000, 'must be at most 20000 characters'),
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

export function parseCsv(content: string | Buffer, file: string): ParsedCsv {
  const text = (typeof content === 'string' ? content : content.toString('utf8')).replace(/^\uFEFF/, '');
  const problems: CsvProblem[] = [];
  const problem = (line: number, column: string, reason: string) =>
    problems.push({ file, line, column, reason });
  // Kept and skipped records each come in file order, but interleave: one cursor each.
  const locate = lineLocator(text);
  const locateSkipped = lineLocator(text);
  let header: string[] = [];

  let records: { record: Record<string, string>; raw: string }[] = [];
  try {
    records = parse<{ record: Record<string, string>; raw: string }>(text, {
      columns: (names: string[]) => (header = names.map((n) => n.trim())),
      raw: true,
      skip_empty_lines: true,
      skip_records_with_error: true,
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
  else if (header.length && !header.includes('prompt'))
    problem(1, 'prompt', 'required column `prompt` is missing from the header');
  const seenHeader = new Set<string>();
  for (const name of header) {
    if (seenHeader.has(name)) problem(1, name, 'column appears twice in the header');
    seenHeader.add(name);
    if (!KNOWN_COLUMNS.includes(name) && !PASS_THROUGH.test(name)) {
      problem(
        1,
        name,
        `unknown column (expected ${KNOWN_COLUMNS.join(', ')}, input.<field> or parameters.<field>)`,
      );
    }
  }
  for (const shadowed of ['input.prompt', 'parameters.resolution', 'parameters.duration']) {
    if (seenHeader.has(shadowed))
      problem(1, shadowed, `use the \`${shadowed.split('.')[1]}\` column instead`);
  }
  if (problems.some((p) => p.line === 1 && p.column !== '(format)'))
    return { file, sha256: sha256(text), rows: [], problems };

  const rows: PromptRow[] = [];
  const ids = new Map<string, number>();
  records.forEach(({ record, raw }, index) => {
    const line = locate(raw);
    const cells = Object.fromEntries(Object.entries(record).filter(([, v]) => v !== ''));
    const parsed = rowSchema.safeParse(cells);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) problem(line, String(issue.path[0] ?? '(row)'), issue.message);
      return;
    }
    const id = parsed.data.id ?? String(index + 1);
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
    rows.push({
      id,
      line,
      prompt: parsed.data.prompt,
      model: parsed.data.model ?? DEFAULTS.model,
      input,
      parameters,
    });
  });
  if (!problems.length && rows.length === 0) problem(2, '(file)', 'the file has a header but no rows');
  problems.sort((a, b) => a.line - b.line);
  return { file, sha256: sha256(text), rows, problems };
}

export async function loadCsv(path: string): Promise<ParsedCsv> {
  return parseCsv(await readFile(path), path);
}

/** Loads and validates; throws CsvValidationError listing every problem. */
export async function loadValidCsv(path: string): Promise<ParsedCsv> {
  const parsed = await loadCsv(path);
  if (parsed.problems.length) throw new CsvValidationError(parsed.problems);
  return parsed;
}
