// `vidbatch pause`.
import { type Command } from 'commander';
import { batchArg, withSession } from '../support';

export function registerPauseCommand(program: Command): void {
  program
    .command('pause')
    .summary('Stop submitting new prompts; those in flight keep being polled')
    .description('Stop submitting new prompts; prompts in flight keep being polled.')
    .argument(...batchArg)
    .option('--reason <text>', 'shown in the progress', 'paused by operator')
    .action(async (ref: string, o: { reason: string }) => {
      const [{ batchHandle, resolveBatchId }, { pauseSignal }] = await Promise.all([
        import('../../client/batches'),
        import('../../contract/messages'),
      ]);
      const batchId = await resolveBatchId(ref);
      await withSession((s) => batchHandle(s.client, batchId).signal(pauseSignal, o.reason));
      console.log(`${batchId}: pause requested`);
    });
}
