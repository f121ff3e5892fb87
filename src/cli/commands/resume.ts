// `vidbatch resume`.
import { type Command } from 'commander';
import { batchArg, withSession } from '../support';

export function registerResumeCommand(program: Command): void {
  program
    .command('resume')
    .summary('Resume a paused batch')
    .description('Resume a paused batch (after an operator pause, or once a refused API key was fixed).')
    .argument(...batchArg)
    .action(async (ref: string) => {
      const [{ batchHandle, resolveBatchId }, { resumeUpdate }, { progressLine }] = await Promise.all([
        import('../../client/batches'),
        import('../../contract/messages'),
        import('../progress-view'),
      ]);
      const batchId = await resolveBatchId(ref);
      const progress = await withSession((s) => batchHandle(s.client, batchId).executeUpdate(resumeUpdate));
      console.log(`${batchId}: resumed. ${progressLine(progress)}`);
    });
}
