// `vidbatch plan`.
import { type Command, Option } from 'commander';
import { addPriceFlags, pricesFrom } from '../price-flags';
import { fail } from '../support';

export function registerPlanCommand(program: Command): void {
  addPriceFlags(
    program
      .command('plan')
      .summary('What `run` would submit for a CSV, and its estimated cost')
      .description(
        'What `run` would submit for a CSV, without starting anything (same as `run --dry-run`): rows by model, resolution and duration; how many the output root already paid for (done earlier, reused from other batches, jobs to check first) and how many new jobs; with prices, the estimated cost of the new jobs.',
      )
      .argument('<csv>', 'input CSV')
      .addOption(
        new Option('--out-root <dir>', 'root of the output folders whose paid requests are reused')
          .env('VIDBATCH_OUT_ROOT')
          .default('out'),
      )
      .option('--fresh', 'as `run --fresh`: count every row as a new job'),
  ).action(
    async (csvPath: string, o: { price?: string[]; prices?: string; outRoot: string; fresh?: boolean }) => {
      const [{ loadValidCsv }, { batchIdFor }, { printPlan }] = await Promise.all([
        import('../../input/csv'),
        import('../../client/batches'),
        import('../plan-report'),
      ]);
      const prices = await pricesFrom(o);
      const csv = await loadValidCsv(csvPath).catch(fail);
      await printPlan(csv, batchIdFor(csv), { outRoot: o.outRoot, fresh: !!o.fresh, prices });
    },
  );
}
