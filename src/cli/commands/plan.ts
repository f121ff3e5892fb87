// `vidbatch plan`.
import { type Command } from 'commander';
import { addPriceFlags, pricesFrom } from '../price-flags';
import { fail } from '../support';

export function registerPlanCommand(program: Command): void {
  addPriceFlags(
    program
      .command('plan')
      .summary('What `run` would submit for a CSV, and its estimated cost')
      .description(
        'What `run` would submit for a CSV, without starting anything (same as `run --dry-run`); with prices, its estimated cost (one job per row).',
      )
      .argument('<csv>', 'input CSV'),
  ).action(async (csvPath: string, o: { price?: string[]; prices?: string }) => {
    const [{ loadValidCsv }, { plan }, { estimateRows }, { estimateLine }] = await Promise.all([
      import('../../input/csv'),
      import('../../input/plan'),
      import('../../results/prices'),
      import('../estimate'),
    ]);
    const prices = await pricesFrom(o);
    const { rows } = await loadValidCsv(csvPath).catch(fail);
    const estimate = prices && estimateRows(rows, prices);
    console.log(JSON.stringify({ ...plan(rows), ...(estimate ? { estimate } : {}) }, null, 2));
    if (estimate) console.error(estimateLine(rows.length, estimate));
  });
}
