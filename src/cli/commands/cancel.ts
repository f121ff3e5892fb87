// `vidbatch cancel`.
import { type Command } from 'commander';
import { batchArg, withSession } from '../support';

export function registerCancelCommand(program: Command): void {
  program
    .command('cancel')
    .summary('Cancel a batch (jobs already submitted may still be billed)')
    .description(
      'Cancel a batch. Finished rows stay in the manifest; rows in flight are recorded as failed with code `cancelled` and their job id (jobs already submitted cannot be recalled and may still finish, and be billed, at the gateway).',
    )
    .argument(...batchArg)
    .action(async (ref: string) => {
      const { cancelBatch, resolveBatchId } = await import('../../client/batches');
      const batchId = await resolveBatchId(ref);
      const how = await withSession((s) => cancelBatch(s.client, batchId, s.taskQueue));
      console.log(
        how === 'cancelled'
          ? `${batchId}: cancellation requested`
          : `${batchId}: terminated (a 0.x batch: no worker of this version can run its cancellation); run its file again to finish it`,
      );
    });
}
