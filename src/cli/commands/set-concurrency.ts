// `vidbatch set-concurrency`.
import { type Command } from 'commander';
import { MAX_CONCURRENCY } from '../../contract/batch-options';
import { ConfigError } from '../../errors';
import { windowSize } from '../batch-flags';
import { batchArg, fail, withBatch } from '../support';

export function registerSetConcurrencyCommand(program: Command): void {
  program
    .command('set-concurrency')
    .summary('Change how many prompts a running batch keeps in flight')
    .description('Change how many prompts a running batch keeps in flight.')
    .argument(...batchArg)
    .argument('<n>', `prompts in flight (1-${MAX_CONCURRENCY})`, windowSize)
    .action(async (ref: string, n: number) => {
      const [{ batchHandle }, { setConcurrencyUpdate }] = await Promise.all([
        import('../../client/batches'),
        import('../../contract/messages'),
      ]);
      let batchId = ref;
      const progress = await withBatch(ref, (s, id) => {
        batchId = id;
        return batchHandle(s.client, id).executeUpdate(setConcurrencyUpdate, { args: [n] });
      }).catch((err: Error) =>
        // The update refused the value (or found no running batch): invalid input, said plainly.
        fail(new ConfigError(`${batchId}: ${err.cause instanceof Error ? err.cause.message : err.message}`)),
      );
      console.log(`${batchId}: window is now ${progress.concurrency}`);
    });
}
