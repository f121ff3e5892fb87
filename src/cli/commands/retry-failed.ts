// `vidbatch retry-failed`.
import { dirname } from 'node:path';
import { type Command, Option } from 'commander';
import { findManifest } from '../../client/batch-status';
import { resolveBatchId } from '../../client/batches';
import { failedRowsCsv } from '../../results/export';
import { startAndFollow } from '../../starter';
import { batchArg, EXIT, summaryLine, withSession } from '../support';

export function registerRetryFailedCommand(program: Command): void {
  program
    .command('retry-failed')
    .description(
      'Start a new batch from the failed rows of a batch (optionally only one error code), linked to it.',
    )
    .argument(...batchArg)
    .option('--code <errorCode>', 'only rows that failed with this code, e.g. deadline_exceeded')
    .addOption(
      new Option('--out-root <dir>', 'root of the output folders').env('VIDBATCH_OUT_ROOT').default('out'),
    )
    .option('--detach', 'start the new batch and exit')
    .action(async (ref: string, o: { code?: string; outRoot: string; detach?: boolean }) => {
      const batchId = await resolveBatchId(ref);
      await withSession(async (session) => {
        const manifest = await findManifest(session.client, batchId, o.outRoot);
        const csv = await failedRowsCsv(manifest, dirname(manifest), batchId, o.code);
        if (csv.rows === 0) {
          console.log(`${batchId}: no failed rows${o.code ? ` with code ${o.code}` : ''}; nothing to retry`);
          return;
        }
        const { started, result } = await startAndFollow(
          session,
          csv.path,
          { retryOf: batchId },
          {
            detach: !!o.detach,
            onStarted: ({ attached, batchId: retryId }) =>
              console.log(
                `${attached ? 'Attached to' : 'Started'} ${retryId}: ${csv.rows} failed rows of ${batchId} (${csv.path})`,
              ),
          },
        );
        if (o.detach) return;
        if (result) console.log(`${started.batchId}: ${summaryLine(result)}`);
        process.exitCode = result?.failed ? EXIT.rowsFailed : EXIT.ok;
      });
    });
}
