// `vidbatch plan`.
import { type Command } from 'commander';
import { loadValidCsv } from '../../input/csv';
import { plan } from '../../input/plan';
import { estimateRows, formatCost, type Price } from '../../results/prices';
import { addPriceFlags, pricesFrom } from '../price-flags';
import { fail } from '../support';

export function registerPlanCommand(program: Command): void {
  addPriceFlags(
    program
      .command('plan')
      .description(
        'What `run` would submit for a CSV, without starting anything (same as `run --dry-run`); with prices, its estimated cost (one job per row).',
      )
      .argument('<csv>', 'input CSV'),
  ).action(async (csvPath: string, o: { price?: Price[]; prices?: string }) => {
    const prices = await pricesFrom(o);
    const { rows } = await loadValidCsv(csvPath).catch(fail);
    const estimate = prices && estimateRows(rows, prices);
    console.log(JSON.stringify({ ...plan(rows), ...(estimate ? { estimate } : {}) }, null, 2));
    if (estimate) console.error(estimateLine(rows.length, estimate));
  });
}

/** "estimated cost: 12.50 for 10 rows (50 s of video); 2 rows have no price". */
export function estimateLine(rows: number, e: ReturnType<typeof estimateRows>): string {
  const unpriced = e.unpricedRows
    ? `; ${e.unpricedRows} ${e.unpricedRows === 1 ? 'row has' : 'rows have'} no price (not counted)`
    : '';
  return `estimated cost: ${formatCost(e.cost, e.currency)} for ${rows} ${rows === 1 ? 'row' : 'rows'} (${e.seconds.toLocaleString('en-US')} s of video, one job per row)${unpriced}`;
}
