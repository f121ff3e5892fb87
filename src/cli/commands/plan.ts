// `vidbatch plan`.
import { resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { addEnhanceFlags, enhanceFrom } from '../enhance-flags';
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
      .option('--fresh', 'as `run --fresh`: count every row as a new job')
      .option('--simulate', 'plan for a `run --simulate` (the simulator is a gateway of its own)'),
  );
  const command = program.commands.find((c) => c.name() === 'plan')!;
  addEnhanceFlags(command, 'write <csv name>.enhanced.csv to review and edit before `run`').action(
    async (
      csvPath: string,
      o: { price?: string[]; prices?: string; outRoot: string; fresh?: boolean; simulate?: boolean } & Record<
        string,
        unknown
      >,
    ) => {
      const [{ loadValidCsv }, { plannedTarget }, { SIMULATOR_STATE_FILE }, { printPlan }, { loadProvider }] =
        await Promise.all([
          import('../../input/csv'),
          import('../../client/target'),
          import('../../client/session'),
          import('../plan-report'),
          import('../../config'),
        ]);
      const prices = await pricesFrom(o);
      const enhance = await enhanceFrom(o);
      // Planned as `run` would send it: the provider's defaults, its refusals as problems.
      const provider = await Promise.resolve()
        .then(() => loadProvider())
        .catch(fail);
      const csv = await loadValidCsv(csvPath, { provider }).catch(fail);
      const target = await Promise.resolve()
        .then(() => plannedTarget(!!o.simulate, SIMULATOR_STATE_FILE))
        .catch(fail);
      if (!enhance) {
        await printPlan(csv, target, { outRoot: o.outRoot, fresh: !!o.fresh, prices });
        return;
      }
      const [{ rewriteForReview, reviewLines }, { EXIT }] = await Promise.all([
        import('../enhance-plan'),
        import('../../errors'),
      ]);
      // Rewrites are kept where the batch's results go: the shared store when there is one.
      const { loadStoreSetting } = await import('../../config');
      const outRoot = loadStoreSetting() ?? resolve(o.outRoot);
      const review = await rewriteForReview(csv, csvPath, enhance, outRoot).catch(fail);
      await printPlan(csv, target, {
        outRoot: o.outRoot,
        fresh: !!o.fresh,
        prices,
        enhance,
        extra: { enhanced: review },
      });
      for (const line of reviewLines(review, outRoot)) console.error(line);
      if (review.failed.length) process.exitCode = EXIT.rowsFailed;
    },
  );
}
