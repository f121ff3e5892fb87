// CSV ingest: csv-parse for the format (BOM, CRLF, quotes, multi-line fields), zod for each row. Every
// problem is collected with its line and column, so one run of `vidbatch validate` shows them all.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import { parse as parseStream, type Options as CsvParseOptions } from 'csv-parse';
import { parse } from 'csv-parse/sync';
import { z } from 'zod';
import { CsvValidationError, type CsvProblem } from '../errors';
import { DEFAULT_MODEL, type PromptRow } from '../contract/rows';
import type { ProviderAdapter } from '../gateway/provider';
import { assignRequestKeys } from './request-key';
import { restoreFormula } from './csv-formula';
import { LineLocator } from './line-locator';
import { Utf8Check } from './utf8-check';

export { firstInvalidUtf8 } from './utf8-check';

const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);

const KNOWN_COLUMNS = ['id', 'prompt', 'original_prompt', 'model', 'resolution', 'duration', 'take'];
const PASS_THROUGH = /^(input|parameters)\.([A-Za-z_][\w-]*)$/;
/** Headers people use for the prompt in other tools. */
const PROMPT_ALIASES = ['text', 'prompts', 'caption', 'description', 'query', 'input'];

/** Temporal carries rows in activity results and workflow inputs: a row must stay well under its payload limits. */
export const MAX_ROW_BYTES = 128 * 1024;
export const MAX_PASS_THROUGH_CELL_BYTES = 64 * 1024;

/** A row's model, resolution and duration when it names none and its provider has no defaults of its own. */
export const DEFAULTS = { model: DEFAULT_MODEL, resolution: '720P', duration: 5 } as const;

/** What the reader needs of the provider the rows are for: its defaults and what it cannot take. */
export type CsvProvider = Pick<ProviderAdapter, 'name' | 'defaultModel' | 'defaults' | 'validate'>;

export interface CsvOptions {
  /**
   * The provider the rows are sent to (GATEWAY_PROVIDER's adapter): its defaults fill in what a row leaves out,
   * and each row is checked with its `validate`. Absent: the Model Gateway's defaults, no check.
   */
  provider?: CsvProvider;
}

/** The model, resolution and duration a row of `provider` gets when it names none. */
export function rowDefaults(provider?: CsvProvider): { model: string; resolution: string; duration: number } {
  return {
    model: provider?.defaultModel ?? DEFAULTS.model,
    resolution: provider?.defaults?.resolution ?? DEFAULTS.resolution,
    duration: provider?.defaults?.duration ?? DEFAULTS.duration,
  };
}

/** Longest model id: a pinned `owner/name:<64 hex>` version fits with room to spare. */
export const MAX_MODEL_LENGTH = 256;

/**
 * What is wrong with a model id, or undefined. Providers name models with paths and versions
 * (`fal-ai/kling-video/v2/master/text-to-video`, `owner/name:version`, `openai/sora-2`), and adapters put them
 * into URL paths: letters, digits and `._-/:@` only, no empty or `..` segment, bounded.
 */
function modelProblem(model: string): string | undefined {
  if (model.length > MAX_MODEL_LENGTH) return `must be at most ${MAX_MODEL_LENGTH} characters`;
  if (/\s/.test(model)) return 'must not contain spaces';
  const bad = /[^\w.:@/-]/.exec(model)?.[0];
  if (bad)
    return `must not contain ${JSON.stringify(bad)}: a model id is letters, digits and . _ - / : @ (such as modelfamily-1.0-r2v, fal-ai/kling-video/v2/master/text-to-video or owner/name:version)`;
  if (model.includes('..')) return 'must not contain ".."';
  if (/^\/|\/$|\/\//.test(model)) return 'must not start or end with "/" or contain "//"';
  return undefined;
}

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
    .superRefine((model, ctx) => {
      const problem = modelProblem(model);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
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
  /** The provider whose defaults the rows have and that checked them; absent: the Model Gateway's, no check. */
  provider?: string;
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

/** CSV columns of the words a provider's refusal starts with that are not columns of their own. */
const COLUMN_OF_FIELD: Record<string, string> = { size: 'resolution', seconds: 'duration' };

/**
 * The column a provider's refusal is about: the field it starts with (`duration 5 is not one sora-2 takes`),
 * as a `parameters.*` or `input.*` column the row has, else the CSV's own column for it.
 */
function refusedColumn(reason: string, cells: Record<string, string>): string {
  const field = /^[A-Za-z_][\w-]*/.exec(reason)?.[0] ?? '';
  const own = COLUMN_OF_FIELD[field] ?? field;
  const given = [`parameters.${field}`, `input.${field}`, own].find((c) => Object.hasOwn(cells, c));
  return given ?? (KNOWN_COLUMNS.includes(own) ? own : '(row)');
}

/**
 * A CSV file's bytes in, its rows and problems out, a chunk at a time: parseCsv gives it a file's content at
 * once, loadCsv streams the file through it, so a big file is never held whole (only its rows are).
 */
class CsvIngest {
  readonly problems: CsvProblem[] = [];
  readonly rows: PromptRow[] = [];
  private readonly check: Utf8Check;
  private readonly locate = new LineLocator();
  private readonly hash = createHash('sha256');
  private readonly rawHash = createHash('sha256');
  /** The file's first bytes while they may still be a byte-order mark; undefined once that is known. */
  private head: Buffer | undefined = Buffer.alloc(0);
  private blank = true;
  private headerProblems = false;
  private readonly ids = new Map<string, number>();
  private index = 0;
  private readonly defaults: ReturnType<typeof rowDefaults>;

  constructor(
    readonly file: string,
    private readonly provider?: CsvProvider,
  ) {
    this.check = new Utf8Check(file);
    this.defaults = rowDefaults(provider);
  }

  private parsed(sha256: string, rows: PromptRow[], problems: CsvProblem[]): ParsedCsv {
    return {
      file: this.file,
      sha256,
      rows,
      problems,
      ...(this.provider ? { provider: this.provider.name } : {}),
    };
  }

  private problem = (line: number, column: string, reason: string) =>
    this.problems.push({ file: this.file, line, column, reason });

  /** csv-parse's settings: each record becomes its row as it is parsed (none are kept). */
  readonly options: CsvParseOptions = {
    columns: (names: string[]) => {
      const header = names.map((n) => n.trim());
      const before = this.problems.length;
      checkHeader(header, this.problem);
      this.headerProblems = this.problems.length > before;
      return header;
    },
    raw: true,
    skip_empty_lines: true,
    skip_records_with_error: true,
    // With `raw`, csv-parse hands each record over as { record, raw } (its types do not say so).
    on_record: (record: unknown) => {
      this.toRow(record as { record: Record<string, string>; raw: string });
      return null;
    },
    on_skip: (err, raw) => {
      const line = (raw ? this.locate.locate(raw, true) : 0) || Number(err?.lines ?? 0);
      this.problem(
        line,
        err?.code === 'CSV_RECORD_INCONSISTENT_COLUMNS' ? '(row)' : '(format)',
        err?.message ?? 'unreadable row',
      );
    },
  };

  /** The next bytes of the file; what to give csv-parse, or undefined once the file is not UTF-8 text. */
  push(chunk: Buffer): Buffer | undefined {
    this.rawHash.update(chunk);
    const text = this.check.push(chunk);
    if (text === undefined) return undefined;
    this.locate.append(text); // the decoder drops a byte-order mark
    if (this.blank && /\S/.test(text)) this.blank = false;
    let bytes = chunk;
    if (this.head) {
      // A UTF-8 byte-order mark is not part of the text: held back until three bytes say whether there is one.
      const head = Buffer.concat([this.head, chunk]);
      if (head.length < 3 && UTF8_BOM.subarray(0, head.length).equals(head)) {
        this.head = head;
        return Buffer.alloc(0);
      }
      this.head = undefined;
      bytes = UTF8_BOM.equals(head.subarray(0, 3)) ? head.subarray(3) : head;
    }
    this.hash.update(bytes);
    return bytes;
  }

  /** After the last chunk (and csv-parse's error, if it stopped at one): the rows and every problem. */
  finish(error?: unknown): ParsedCsv {
    const rest = this.check.end();
    if (this.check.problem) return this.parsed(this.rawHash.digest('hex'), [], [this.check.problem]);
    if (rest) this.locate.append(rest);
    const sha256 = this.hash.digest('hex');
    if (error) {
      const e = error as { message: string; lines?: number };
      this.problem(e.lines ?? 1, '(format)', e.message);
    }
    if (this.blank)
      this.problem(1, '(file)', 'the file is empty; expected a header row with a `prompt` column');
    if (this.headerProblems) return this.parsed(sha256, [], this.problems);
    if (!this.problems.length && this.rows.length === 0)
      this.problem(2, '(file)', 'the file has a header but no rows');
    assignRequestKeys(this.rows);
    this.problems.sort((a, b) => a.line - b.line);
    return this.parsed(sha256, this.rows, this.problems);
  }

  private toRow({ record, raw }: { record: Record<string, string>; raw: string }) {
    const at = this.index++;
    const line = this.locate.locate(raw);
    if (this.headerProblems) return;
    const { ids, problem, rows } = this;
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
    const { defaults } = this;
    const parameters: Record<string, unknown> = {
      resolution: parsed.data.resolution ?? defaults.resolution,
      duration: parsed.data.duration ?? defaults.duration,
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
      model: parsed.data.model ?? defaults.model,
      input,
      parameters,
      ...(parsed.data.take ? { take: parsed.data.take } : {}),
    };
    if (tooLarge(row, cells, line, problem)) return;
    // What the provider cannot take is the row's problem now, not a refusal at submit time. The row is kept: a
    // worker reading the file finds the rows at the positions the batch counted.
    const refused = this.provider?.validate?.({ model: row.model, input, parameters });
    if (refused) {
      const column = refusedColumn(refused, cells);
      const given = Object.hasOwn(cells, column)
        ? ''
        : ` (the row gives none: ${this.provider!.name}'s default)`;
      problem(line, column, `${this.provider!.name}: ${refused}${given}`);
    }
    rows.push(row);
  }
}

export function parseCsv(content: string | Buffer, file: string, options: CsvOptions = {}): ParsedCsv {
  const ingest = new CsvIngest(file, options.provider);
  const bytes = ingest.push(typeof content === 'string' ? Buffer.from(content) : content);
  if (!bytes) return ingest.finish();
  try {
    parse(bytes, ingest.options);
  } catch (err) {
    return ingest.finish(err);
  }
  return ingest.finish();
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

export interface LoadCsvOptions extends CsvOptions {
  /** Bytes read at a time (default 1 MiB). */
  chunkBytes?: number;
}

/** Reads the file a chunk at a time: what is held is its rows, never its whole text. */
export async function loadCsv(path: string, options: LoadCsvOptions | number = {}): Promise<ParsedCsv> {
  const { chunkBytes = 1 << 20, ...rest } = typeof options === 'number' ? { chunkBytes: options } : options;
  return loadCsvFrom(createReadStream(path, { highWaterMark: chunkBytes }), path, rest);
}

/** loadCsv of a CSV read from elsewhere (an object store), `file` naming it in problems. */
export async function loadCsvFrom(
  chunks: AsyncIterable<Uint8Array>,
  file: string,
  options: CsvOptions = {},
): Promise<ParsedCsv> {
  const ingest = new CsvIngest(file, options.provider);
  const parser = parseStream(ingest.options).resume();
  let error: unknown;
  parser.on('error', (err) => (error ??= err));
  for await (const chunk of chunks) {
    // Read to the end even after a problem: the sha256 is of the whole file.
    const bytes = ingest.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
    if (bytes && !error) parser.write(bytes);
  }
  parser.end();
  await finished(parser).catch((err: unknown) => (error ??= err));
  return ingest.finish(error);
}

/**
 * The sha256 loadCsv gives this file (of its bytes without a UTF-8 byte-order mark), without parsing it: how a
 * worker checks that a batch's CSV is the one it started from.
 */
export async function csvFileSha256(path: string): Promise<string> {
  const hash = csvHash();
  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) hash.update(chunk);
  return hash.digest();
}

/** The sha256 loadCsv gives a CSV (of its bytes without a UTF-8 byte-order mark), fed its bytes in order. */
export function csvHash(): { update(chunk: Buffer): void; digest(): string } {
  const hash = createHash('sha256');
  // The first 3 bytes are held until known, so a mark split across chunks is still left out.
  let head: Buffer | undefined = Buffer.alloc(0);
  const flushHead = () => {
    if (!head) return;
    hash.update(UTF8_BOM.equals(head.subarray(0, 3)) ? head.subarray(3) : head);
    head = undefined;
  };
  return {
    update(chunk) {
      if (!head) return void hash.update(chunk);
      head = Buffer.concat([head, chunk]);
      if (head.length >= 3) flushHead();
    },
    digest: () => {
      flushHead();
      return hash.digest('hex');
    },
  };
}

/** Loads and validates (for `options.provider`); throws CsvValidationError listing every problem. */
export async function loadValidCsv(path: string, options: CsvOptions = {}): Promise<ParsedCsv> {
  const parsed = await loadCsv(path, options);
  if (parsed.problems.length) throw new CsvValidationError(parsed.problems);
  return parsed;
}
