// `vidbatch retry-failed`: a new batch from the failed rows of one, started and followed like `run` (a worker
// runs here unless TEMPORAL_ADDRESS is set; --detach needs a server that outlives the command).
import { dirname } from 'node:path';
import { type Command, Option } from 'commander';
import { findManifest } from '../../client/batch-status';
import { resolveBatchId } from '../../client/batches';
import { failedRowsCsv } from '../../results/export';
import { followInTerminal, openBatchSession } from '../follow';
import { batchArg } from '../support';

export function registerRetryFailedCommand(program: Command): void {
  program
    .command('retry-failed')
    .description(
      'Start a new batch from the failed rows of a batch (optionally only one error code), linked to it, and follow it like `run` (same progress, summary and exit codes).',
    )
    .argument(...batchArg)
    .option('--code <errorCode>', 'only rows that failed with this code, e.g. deadline_exceeded')
    .addOption(
      new Option('--out-root <dir>', 'root of the output folders').env('VIDBATCH_OUT_ROOT').default('out'),
    )
    .option(
      '--detach',
      'start the new batch and exit; needs TEMPORAL_ADDRESS or a running `vidbatch server`, and workers',
    )
    .option('--json', 'print the final result as JSON')
    .action(async (ref: string, o: { code?: string; outRoot: string; detach?: boolean; json?: boolean }) => {
      const batchId = await resolveBatchId(ref);
      const session = await openBatchSession({ simulate: false, detach: !!o.detach });
      try {
        const manifest = await findManifest(session.client, batchId, o.outRoot);
        const csv = await failedRowsCsv(manifest, dirname(manifest), batchId, o.code);
        if (csv.rows === 0) {
          console.log(`${batchId}: no failed rows${o.code ? ` with code ${o.code}` : ''}; nothing to retry`);
          return;
        }
        await followInTerminal(session, {
          csvPath: csv.path,
          options: { retryOf: batchId },
          detach: !!o.detach,
          json: !!o.json,
          startedLine: ({ attached, batchId: retryId }) =>
            `${attached ? 'Attached to' : 'Started'} ${retryId}: ${csv.rows} failed rows of ${batchId} (${csv.path})`,
        });
      } finally {
        await session.close();
      }
    });
}
