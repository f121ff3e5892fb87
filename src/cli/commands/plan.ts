// `vidbatch plan`.
import { type Command } from 'commander';
import { loadValidCsv } from '../../input/csv';
import { plan } from '../../input/plan';
import { fail } from '../support';

export function registerPlanCommand(program: Command): void {
  program
    .command('plan')
    .description('What `run` would submit for a CSV, without starting anything (same as `run --dry-run`).')
    .argument('<csv>', 'input CSV')
    .action(async (csvPath: string) => {
      const { rows } = await loadValidCsv(csvPath).catch(fail);
      console.log(JSON.stringify(plan(rows), null, 2));
    });
}
