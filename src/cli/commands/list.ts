// `vidbatch list`.
import { type Command, Option } from 'commander';
import { positiveWhole, withSession } from '../support';

export function registerListCommand(program: Command): void {
  program
    .command('list')
    .summary('Recent batches with their state and counts')
    .description('Recent batches with their state and counts, from Temporal visibility.')
    .addOption(new Option('--limit <n>', 'how many (>= 1)').argParser(positiveWhole).default(20))
    .option('--json', 'print as JSON')
    .action(async (o: { limit: number; json?: boolean }) => {
      const { listBatches } = await import('../../client/batch-status');
      const rows = await withSession((s) => listBatches(s.client, o.limit));
      if (o.json) return console.log(JSON.stringify(rows, null, 2));
      if (!rows.length) return console.log('no batches yet');
      for (const r of rows) {
        const counts = r.total === undefined ? '' : `${r.succeeded} ok, ${r.failed} failed of ${r.total}`;
        console.log(
          `${r.batchId}  ${r.workflowStatus.padEnd(16)} ${r.startTime.toISOString()}  ${counts}` +
            (r.target ? `  for ${r.target}` : ''),
        );
      }
    });
}
