// The estimated-cost line of `plan` and `run --dry-run`.
import { type estimateRows, formatCost } from '../results/prices';

/** "estimated cost: 12.50 for 10 rows (50 s of video); 2 rows have no price". */
export function estimateLine(rows: number, e: ReturnType<typeof estimateRows>): string {
  const unpriced = e.unpricedRows
    ? `; ${e.unpricedRows} ${e.unpricedRows === 1 ? 'row has' : 'rows have'} no price (not counted)`
    : '';
  return `estimated cost: ${formatCost(e.cost, e.currency)} for ${rows} ${rows === 1 ? 'row' : 'rows'} (${e.seconds.toLocaleString('en-US')} s of video, one job per row)${unpriced}`;
}
