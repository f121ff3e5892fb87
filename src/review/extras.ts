// Where the spend ledger and the user's prices reach the gallery: the header's ledger line
// ("jobs made: N for M rows ..."), the batch's estimated spend (every job made, kept or not) and each card's
// estimated cost. Verification needs nothing here: data.ts reads it from each manifest row.
import { computeLedger, formatLedger } from '../results/ledger';
import { estimateCost, type Prices } from '../results/prices';
import type { ReviewExtras, ReviewSources } from './data';

export async function reviewExtras(
  sources: ReviewSources,
  outDir: string,
  prices?: Prices,
): Promise<ReviewExtras> {
  const ledger = await computeLedger(outDir, {
    ...(sources.rows.length ? { rows: sources.rows.length } : {}),
    ...(prices ? { prices } : {}),
  });
  return {
    ledger: formatLedger(ledger),
    ...(ledger.estimatedCost !== undefined ? { spend: ledger.estimatedCost } : {}),
    ...(prices ? { estimateCost: (row) => estimateCost(row, prices) } : {}),
  };
}
