// `vidbatch results`.
import { dirname } from 'node:path';
import { type Command, Option } from 'commander';
import { findManifest } from '../../client/batch-status';
import { resolveBatchId } from '../../client/batches';
import { exportResults } from '../../results/export';
import { verificationLines } from '../../results/verification-summary';
import { batchArg, withSession } from '../support';

export function registerResultsCommand(program: Command): void {
  program
    .command('results')
    .description(
      "Export a batch's manifest as succeeded and failed files; the failed CSV is a valid input CSV.",
    )
    .argument(...batchArg)
    .addOption(new Option('--format <fmt>', 'file format').choices(['csv', 'jsonl']).default('csv'))
    .option('--dir <dir>', 'where to write (default: next to the manifest)')
    .addOption(
      new Option('--out-root <dir>', 'root of the output folders').env('VIDBATCH_OUT_ROOT').default('out'),
    )
    .option('--json', 'print a summary as JSON')
    .action(
      async (ref: string, o: { format: 'csv' | 'jsonl'; dir?: string; outRoot: string; json?: boolean }) => {
        const batchId = await resolveBatchId(ref);
        const manifest = await withSession((s) => findManifest(s.client, batchId, o.outRoot));
        const exported = await exportResults(manifest, o.dir ?? dirname(manifest), o.format);
        if (o.json) console.log(JSON.stringify(exported, null, 2));
        else {
          console.log(
            `${exported.succeeded} succeeded, ${exported.failed} failed:\n${exported.files.map((f) => `  ${f}`).join('\n')}`,
          );
          for (const line of verificationLines(exported.verification)) console.log(line);
        }
      },
    );
}
