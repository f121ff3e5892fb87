// What a run would submit for a CSV (`vidbatch plan`, `run --dry-run`): counts per model, resolution and
// duration.
import type { PromptRow } from '../contract/rows';

/** What a run would submit: counts per model, resolution and duration. */
export function plan(rows: PromptRow[]): {
  rows: number;
  byModel: Record<string, number>;
  byResolution: Record<string, number>;
  byDuration: Record<string, number>;
} {
  const count = (key: (r: PromptRow) => string) =>
    rows.reduce<Record<string, number>>((acc, r) => ((acc[key(r)] = (acc[key(r)] ?? 0) + 1), acc), {});
  return {
    rows: rows.length,
    byModel: count((r) => r.model),
    byResolution: count((r) => String(r.parameters.resolution)),
    byDuration: count((r) => String(r.parameters.duration)),
  };
}
