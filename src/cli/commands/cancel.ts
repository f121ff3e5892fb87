// `vidbatch cancel`.
import { type Command } from 'commander';
import { batchArg, withBatch } from '../support';

export function registerCancelCommand(program: Command): void {
  program
    .command('cancel')
    .summary('Cancel a batch, stopping its jobs where the provider can')
    .description(
      'Cancel a batch. Finished rows stay in the manifest; rows in flight are recorded as failed with code `cancelled` and their job id. Their jobs are stopped at the provider where it can cancel one (fal, Replicate, OpenAI-Videos; a job that finished meanwhile is kept); at the Model Gateway, which has no cancel, they may still finish, and be billed, and their videos are kept if they come. To stop for a while without losing a job: `pause`.',
    )
    .argument(...batchArg)
    .action(async (ref: string) => {
      const { cancelBatch } = await import('../../client/batches');
      const [batchId, how] = await withBatch(ref, async (s, id) => [id, await cancelBatch(s, id)] as const);
      console.log(
        how === 'cancelled'
          ? `${batchId}: cancellation requested`
          : how === 'terminated-old'
            ? `${batchId}: terminated (a 0.x batch: no worker of this version can run its cancellation); run its file again to finish it`
            : `${batchId}: terminated (no worker serves it: the process that ran it has ended); its jobs are in its journal, so running its file again checks them and pays for none twice`,
      );
    });
}
