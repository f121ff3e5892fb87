// `vidbatch watch`.
import { type Command } from 'commander';
import { batchArg, EXIT, summaryLine, withBatch } from '../support';

export function registerWatchCommand(program: Command): void {
  program
    .command('watch')
    .summary('Follow a batch with a live progress bar until it is done')
    .description('Follow a batch with a live progress bar until it is done (Ctrl-C stops watching only).')
    .argument(...batchArg)
    .action(async (ref: string) => {
      const [{ batchHandle, followBatch }, { createProgressView }] = await Promise.all([
        import('../../client/batches'),
        import('../progress-view'),
      ]);
      await withBatch(ref, async (session, batchId) => {
        const abort = new AbortController();
        process.once('SIGINT', () => abort.abort());
        const view = createProgressView();
        const result = await followBatch(
          batchHandle(session.client, batchId),
          (p) => view.update(p),
          abort.signal,
        );
        view.stop();
        if (result) console.log(`${batchId}: ${summaryLine(result)}`);
        process.exitCode = !result ? EXIT.interrupted : result.failed ? EXIT.rowsFailed : EXIT.ok;
      });
    });
}
