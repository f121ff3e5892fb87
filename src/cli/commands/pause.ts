// `vidbatch pause`.
import { type Command } from 'commander';
import { batchArg, withBatch } from '../support';

export function registerPauseCommand(program: Command): void {
  program
    .command('pause')
    .summary('Stop submitting new prompts; those in flight keep being polled')
    .description('Stop submitting new prompts; prompts in flight keep being polled.')
    .argument(...batchArg)
    .option('--reason <text>', 'shown in the progress', 'paused by operator')
    .action(async (ref: string, o: { reason: string }) => {
      const [{ batchHandle }, { pauseSignal }] = await Promise.all([
        import('../../client/batches'),
        import('../../contract/messages'),
      ]);
      const batchId = await withBatch(ref, async (s, id) => {
        await batchHandle(s.client, id).signal(pauseSignal, o.reason);
        return id;
      });
      console.log(`${batchId}: pause requested`);
    });
}
