// A row's request identity: what is sent (model, `input`, `parameters`), hashed, plus its take. Identical
// requests in one file are separate takes (the first, second, third occurrence), so three identical rows make
// three videos, and the same rows in another file are the same three requests. A `take` column names takes
// deliberately (the gallery's redo export sets one, so a redo is a new request). A row rewritten before it is
// sent is keyed by its original request plus the rewrite's settings (chat model, instructions): the rewrite is
// kept in the output root, so the same original and settings always send the same text.
import { createHash } from 'node:crypto';
import type { EnhanceOptions } from '../contract/enhance';
import type { PromptRow } from '../contract/rows';

/** JSON with object keys sorted at every depth: the same request always hashes the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The hash of what a row sends: 24 hex characters of sha256 over model, input and parameters, and for a row
 * to be rewritten, the rewrite's chat model and the sha256 of its instructions.
 */
export function requestHash(
  row: Pick<PromptRow, 'model' | 'input' | 'parameters'>,
  enhance?: EnhanceOptions,
): string {
  const body = canonical({
    model: row.model,
    input: row.input,
    parameters: row.parameters,
    ...(enhance
      ? {
          enhance: {
            model: enhance.model,
            instructions: createHash('sha256').update(enhance.instructions).digest('hex'),
          },
        }
      : {}),
  });
  return createHash('sha256').update(body).digest('hex').slice(0, 24);
}

/**
 * The request key of each row given in file order: `<hash>/<n>` for the n-th occurrence of a request, or
 * `<hash>/<take>/<n>` when the row names its take. With `enhance`, rows that will be rewritten (those without
 * an `originalPrompt`) are keyed with the rewrite's settings.
 */
export function requestKeyer(enhance?: EnhanceOptions): (row: PromptRow & { take?: string }) => string {
  const seen = new Map<string, number>();
  return (row) => {
    const hash = requestHash(row, row.originalPrompt === undefined ? enhance : undefined);
    const base = row.take ? `${hash}/${row.take}` : hash;
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    return `${base}/${n}`;
  };
}

/** Sets `request` on every row, in file order (requestKeyer). */
export function assignRequestKeys(rows: (PromptRow & { take?: string })[], enhance?: EnhanceOptions): void {
  const key = requestKeyer(enhance);
  for (const row of rows) row.request = key(row);
}
