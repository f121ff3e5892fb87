// The user's prices (the gateway's API gives none): `--price <model>=<amount per second>` flags and a prices file
// (CSV or JSON: model, resolution -> per second or per video), validated with zod; every problem names the flag
// or the file, line and field. `estimateCost` prices one row (or one job of it) from its model and parameters.
import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { parse } from 'csv-parse/sync';
import { z } from 'zod';
import { ConfigError } from '../errors';

/** Any model, or any resolution, in a price entry. */
export const ANY = '*';
/** A row without `parameters.duration` lasts this long (the spec's default). */
export const DEFAULT_DURATION_SECONDS = 5;

/** One price: for a model (or `*`) at a resolution (or `*`), per second of video or per video. */
export interface Price {
  model: string;
  resolution: string;
  perSecond?: number;
  perVideo?: number;
}

export interface Prices {
  entries: Price[];
  /** Printed after amounts when given (a prices file's `currency`). */
  currency?: string;
}

/** What estimateCost needs of a row (PromptRow, PromptResult and the manifest's lines all have it). */
export interface Priceable {
  model: string;
  parameters?: Record<string, unknown>;
}

export class PriceError extends ConfigError {
  override name = 'PriceError';
}

const amount = z.number({ error: 'must be a number >= 0' }).min(0, 'must be a number >= 0');
const modelName = z
  .string({ error: 'is required' })
  .trim()
  // Every provider's ids: the Model Gateway's `modelfamily-1.0-r2v`, fal's `fal-ai/wan-25-preview/text-to-video`,
  // Replicate's `owner/name` or `owner/name:version`.
  .regex(
    /^([A-Za-z0-9._@-]+(?:[/:][A-Za-z0-9._@-]+)*|\*)$/,
    'must be a model id such as modelfamily-1.0-r2v or fal-ai/wan-25-preview/text-to-video, or *',
  );
const resolutionName = z
  .string()
  .trim()
  .regex(/^(\d{3,4}[pP]|\*)$/, 'must look like 720P, or *')
  .transform((r) => r.toUpperCase());

const priceSchema = z
  .object({
    model: modelName,
    resolution: resolutionName.optional(),
    perSecond: amount.optional(),
    perVideo: amount.optional(),
  })
  .strict()
  .refine((p) => (p.perSecond === undefined) !== (p.perVideo === undefined), {
    message: 'give exactly one of perSecond and perVideo',
    path: ['perSecond'],
  });

const fileSchema = z.union([
  z.array(priceSchema),
  z
    .object({
      currency: z.string().trim().min(1).max(12).optional(),
      prices: z.array(priceSchema),
    })
    .strict(),
]);

function entry(p: z.infer<typeof priceSchema>): Price {
  return {
    model: p.model,
    resolution: p.resolution ?? ANY,
    ...(p.perSecond !== undefined ? { perSecond: p.perSecond } : {}),
    ...(p.perVideo !== undefined ? { perVideo: p.perVideo } : {}),
  };
}

/**
 * One `--price` value: `<model>=<amount per second>`, or `<model>@<resolution>=<amount>`; `*` for any model.
 * Throws a message without the flag's name (commander adds it: "option '--price <model=amount>' argument ...").
 */
export function parsePriceFlag(value: string): Price {
  const m = /^\s*([^=@\s]+)(?:@([^=\s]+))?\s*=\s*(\S+)\s*$/.exec(value);
  if (!m) throw new PriceError('must be <model>=<amount per second>, e.g. modelfamily-1.0-r2v=0.05');
  const amountText = m[3]!;
  const parsed = priceSchema.safeParse({
    model: m[1],
    ...(m[2] ? { resolution: m[2] } : {}),
    perSecond: amountText.trim() === '' ? NaN : Number(amountText),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path[0] === 'perSecond' ? 'amount' : String(issue.path[0]);
    throw new PriceError(`${field} ${issue.message}`);
  }
  return entry(parsed.data);
}

/** The CSV form: columns model, resolution (blank or * = any), per_second or per_video, and optionally currency. */
const CSV_COLUMNS = ['model', 'resolution', 'per_second', 'per_video', 'currency'];

function parseCsvPrices(file: string, text: string): Prices {
  let records: { record: Record<string, string>; info: { lines: number } }[];
  try {
    records = parse(text, {
      columns: (header: string[]) => header.map((h) => h.trim().toLowerCase()),
      skip_empty_lines: true,
      trim: true,
      bom: true,
      info: true,
    });
  } catch (err) {
    throw new PriceError(`prices file ${file}: not valid CSV: ${(err as Error).message}`);
  }
  const header = records[0] ? Object.keys(records[0].record) : [];
  const unknown = header.find((h) => !CSV_COLUMNS.includes(h));
  if (unknown !== undefined)
    throw new PriceError(
      `prices file ${file}, line 1, column ${unknown}: unknown column (expected ${CSV_COLUMNS.join(', ')})`,
    );
  if (!records.length) throw new PriceError(`prices file ${file}: no prices (header and one line per price)`);
  const entries: Price[] = [];
  const currencies = new Set<string>();
  for (const { record, info } of records) {
    const line = info.lines;
    const number = (column: string) => {
      const cell = record[column];
      return cell === undefined || cell === '' ? undefined : Number(cell);
    };
    const parsed = priceSchema.safeParse({
      model: record.model || undefined,
      ...(record.resolution ? { resolution: record.resolution } : {}),
      ...(number('per_second') !== undefined ? { perSecond: number('per_second') } : {}),
      ...(number('per_video') !== undefined ? { perVideo: number('per_video') } : {}),
    });
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const field = String(issue.path[0] ?? 'model');
      const column = { perSecond: 'per_second', perVideo: 'per_video' }[field] ?? field;
      const reason = issue.message.replace('perSecond and perVideo', 'per_second and per_video');
      throw new PriceError(`prices file ${file}, line ${line}, column ${column}: ${reason}`);
    }
    entries.push(entry(parsed.data));
    if (record.currency) currencies.add(record.currency);
  }
  if (currencies.size > 1)
    throw new PriceError(
      `prices file ${file}, column currency: one currency only (found ${[...currencies].join(', ')})`,
    );
  return { entries, ...(currencies.size ? { currency: [...currencies][0] } : {}) };
}

function parseJsonPrices(file: string, text: string): Prices {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new PriceError(`prices file ${file}: not valid JSON: ${(err as Error).message}`);
  }
  const parsed = fileSchema.safeParse(data);
  if (!parsed.success) {
    // The union reports the shape it came closest to; name the deepest path it found.
    const issues = parsed.error.issues.flatMap((i) =>
      i.code === 'invalid_union' ? i.errors.flat().map((e) => ({ ...e, path: [...i.path, ...e.path] })) : [i],
    );
    const deepest = issues.sort((a, b) => b.path.length - a.path.length)[0]!;
    const where = deepest.path.length ? deepest.path.map(String).join('.') : '(file)';
    throw new PriceError(`prices file ${file}, field ${where}: ${deepest.message}`);
  }
  const value = parsed.data;
  return Array.isArray(value)
    ? { entries: value.map(entry) }
    : { entries: value.prices.map(entry), ...(value.currency ? { currency: value.currency } : {}) };
}

/** A prices file: `.json` (an array of prices, or `{currency, prices}`), anything else is read as CSV. */
export async function loadPricesFile(file: string): Promise<Prices> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new PriceError(`prices file ${file}: cannot read it: ${(err as Error).message}`);
  }
  return extname(file).toLowerCase() === '.json' ? parseJsonPrices(file, text) : parseCsvPrices(file, text);
}

/**
 * The prices a command uses: the file's (if any), then each `--price` flag (a flag replaces a file entry for
 * the same model and resolution). Undefined when neither is given.
 */
export async function parsePrices(o: { price?: Price[]; prices?: string }): Promise<Prices | undefined> {
  const file = o.prices ? await loadPricesFile(o.prices) : undefined;
  const flags = o.price ?? [];
  if (!file && !flags.length) return undefined;
  const entries = [...(file?.entries ?? [])];
  for (const p of flags) {
    const i = entries.findIndex((e) => e.model === p.model && e.resolution === p.resolution);
    if (i >= 0) entries[i] = p;
    else entries.push(p);
  }
  return { entries, ...(file?.currency ? { currency: file.currency } : {}) };
}

/**
 * The row's duration in seconds: `parameters.duration`, else an OpenAI-Videos row's own `parameters.seconds`,
 * else the spec's default.
 */
export function durationOf(row: Priceable): number {
  for (const given of [row.parameters?.duration, row.parameters?.seconds]) {
    const d = Number(given);
    if (given !== undefined && Number.isFinite(d) && d > 0) return d;
  }
  return DEFAULT_DURATION_SECONDS;
}

/** The price that applies: model and resolution, then model at any resolution, then `*` likewise. */
export function priceFor(row: Priceable, prices: Prices): Price | undefined {
  const given = row.parameters?.resolution;
  const resolution = typeof given === 'string' ? given.toUpperCase() : '';
  const find = (model: string, res: string) =>
    prices.entries.find((e) => e.model === model && e.resolution === res);
  return find(row.model, resolution) ?? find(row.model, ANY) ?? find(ANY, resolution) ?? find(ANY, ANY);
}

/** What one job of this row costs (per video, or per second x duration); undefined when no price applies. */
export function estimateCost(row: Priceable, prices: Prices | undefined): number | undefined {
  const price = prices && priceFor(row, prices);
  if (!price) return undefined;
  return price.perVideo ?? (price.perSecond ?? 0) * durationOf(row);
}

/** "12.34" or "12.34 USD". */
export function formatCost(amount: number, currency?: string): string {
  const text = amount.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  return currency ? `${text} ${currency}` : text;
}

/** What a run of these rows would cost, one job per row (`plan`): undefined cost parts are counted as unpriced. */
export interface CostEstimate {
  cost: number;
  /** Seconds of video asked for, over all rows. */
  seconds: number;
  /** Rows no price applies to (left out of `cost`). */
  unpricedRows: number;
  currency?: string;
}

export function estimateRows(rows: readonly Priceable[], prices: Prices): CostEstimate {
  let cost = 0;
  let seconds = 0;
  let unpricedRows = 0;
  for (const row of rows) {
    seconds += durationOf(row);
    const c = estimateCost(row, prices);
    if (c === undefined) unpricedRows += 1;
    else cost += c;
  }
  return { cost, seconds, unpricedRows, ...(prices.currency ? { currency: prices.currency } : {}) };
}
