// `vidbatch set-concurrency`.
import { type Command } from 'commander';
import { MAX_CONCURRENCY } from '../../contract/batch-options';
import { ConfigError } from '../../errors';
import { windowSize } from '../batch-flags';
import { batchArg, fail, withSession } from '../support';

export function registerSetConcurrencyCommand(program: Command): void {
  program
    .command('set-concurrency')
    .summary('Change how many prompts a running batch keeps in flight')
    .description('Change how many prompts a running batch keeps in flight.')
    .argument(...batchArg)
    .argument('<n>', `prompts in flight (1-${MAX_CONCURRENCY})`, windowSize)
    .action(async (ref: string, n: number) => {
      const [{ batchHandle, resolveBatchId }, { setConcurrencyUpdate }] = await Promise.all([
        import('../../client/batches'),
        import('../../contract/messages'),
      ]);
      const batchId = await resolveBatchId(ref);
      const progress = await withSession((s) =>
        batchHandle(s.client, batchId).executeUpdate(setConcurrencyUpdate, { args: [n] }),
      ).catch((err: Error) =>
        // The update refused the value (or found no running batch): invalid input, said plainly.
        fail(new ConfigError(`${batchId}: ${err.cause instanceof Error ? err.cause.message : err.message}`)),
      );
      console.log(`${batchId}: window is now ${progress.concurrency}`);
    });
}
