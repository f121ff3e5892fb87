// `vidbatch resume`.
import { type Command } from 'commander';
import { batchArg, withBatch } from '../support';

export function registerResumeCommand(program: Command): void {
  program
    .command('resume')
    .summary('Resume a paused batch')
    .description('Resume a paused batch (after an operator pause, or once a refused API key was fixed).')
    .argument(...batchArg)
    .action(async (ref: string) => {
      const [{ batchHandle }, { resumeUpdate }, { progressLine }] = await Promise.all([
        import('../../client/batches'),
        import('../../contract/messages'),
        import('../progress-view'),
      ]);
      const [batchId, progress] = await withBatch(
        ref,
        async (s, id) => [id, await batchHandle(s.client, id).executeUpdate(resumeUpdate)] as const,
      );
      console.log(`${batchId}: resumed. ${progressLine(progress)}`);
    });
}
