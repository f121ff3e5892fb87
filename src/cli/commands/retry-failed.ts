// `vidbatch retry-failed`: a new batch from the failed rows of one (the library's retryFailed: each row first
// checks the job the original batch made for it), started and followed like `run` (a worker runs here unless
// TEMPORAL_ADDRESS is set; --detach needs a server that outlives the command).
import { dirname, join } from 'node:path';
import { type Command, Option } from 'commander';
import {
  addRateBudgetFlags,
  addScheduleFlags,
  addSpendSafetyFlags,
  givenOptions,
  removedVariableWarnings,
  scheduleAndSpendOptions,
  verifyOption,
} from '../batch-flags';
import { GROUP } from '../help-groups';
import { batchArg, withBatch } from '../support';

/** The download roots (`<root>/<batch-id>/<row>.mp4`) of a batch's downloaded videos, from its manifest. */
async function downloadRootsOf(manifest: string): Promise<string[]> {
  const { readManifest } = await import('../../results/manifest');
  const rows = await readManifest(manifest).catch(() => []);
  return [...new Set(rows.flatMap((r) => (r.file ? [dirname(dirname(r.file))] : [])))];
}

export function registerRetryFailedCommand(program: Command): void {
  const command = program
    .command('retry-failed')
    .summary('Start and follow a new batch from the failed rows of a batch')
    .description(
      'Start a new batch from the failed rows of a batch (optionally only one error code), linked to it, and follow it like `run` (same progress, summary and exit codes). A row whose original job may still finish has that job checked first, not paid again; `--code submit_unknown` re-sends rows whose submit had an unknown outcome, deliberately. Without --code, rows the gateway refused for their content and rows whose job it no longer knows (job_gone) are left out, and said so; `--code <their code>` sends them, with a new job (as for no_video_url and video_mismatch).',
    )
    .argument(...batchArg)
    .option(
      '--code <errorCode>',
      'only rows that failed with this code, e.g. deadline_exceeded or submit_unknown',
    )
    .option(
      '--detach',
      'start the new batch and exit; needs TEMPORAL_ADDRESS or a running `vidbatch server`, and workers',
    )
    .option('--json', 'print the final result as JSON')
    .addOption(
      new Option(
        '--out-root <dir>',
        'root of the output folders: the original batch is read from <dir>/<batch-id>/, the new one writes <dir>/<new-batch-id>/',
      )
        .helpGroup(GROUP.output)
        .env('VIDBATCH_OUT_ROOT')
        .default('out'),
    )
    .addOption(verifyOption());
  addSpendSafetyFlags(command);
  addRateBudgetFlags(command);
  addScheduleFlags(command);
  command.action(async (ref: string, all: Record<string, unknown>, cmd: Command) => {
    for (const line of removedVariableWarnings()) console.error(line);
    const [{ retryFailed }, { manifestPath }, { followInTerminal, openBatchSession }, { leftOutLines }] =
      await Promise.all([
        import('../../client/retry-failed'),
        import('../../results/manifest'),
        import('../follow'),
        import('../../results/export'),
      ]);
    const o: Record<string, unknown> = { ...givenOptions(cmd, all), outRoot: all.outRoot };
    const code = o.code as string | undefined;
    const outRoot = o.outRoot as string;
    // Named by its CSV, the batch is looked up on the server first (a session of its own, before this one's worker).
    const { BATCH_ID } = await import('../../contract/target');
    const batchId = BATCH_ID.test(ref) ? ref : await withBatch(ref, (_s, id) => Promise.resolve(id), outRoot);
    // The retry downloads where the original did (retryFailed): this command's worker may write there.
    const downloadRoots = await downloadRootsOf(manifestPath(join(outRoot, batchId)));
    const session = await openBatchSession({
      simulate: false,
      detach: !!o.detach,
      ...(downloadRoots.length ? { allow: { download: downloadRoots } } : {}),
    });
    try {
      let rows = 0;
      let leftOutRows = 0;
      let csvPath = '';
      let retryOf = batchId;
      await followInTerminal(session, {
        start: async () => {
          const started = await retryFailed(session, batchId, {
            ...scheduleAndSpendOptions(o),
            ...(code ? { code } : {}),
            outRoot,
            onEarlier: (earlier) => {
              for (const e of earlier)
                console.error(
                  `${e.rows} row(s) left out: an earlier retry-failed took them (${e.batchId}); they go on there: vidbatch retry-failed ${e.batchId}`,
                );
            },
            onChained: (of, retry) =>
              console.error(
                `${retry}, the retry-failed of ${of}, has completed: retrying the rows that failed there`,
              ),
            onLeftOut: (leftOut) => {
              leftOutRows = leftOut.reduce((n, l) => n + l.rows, 0);
              for (const line of leftOutLines(leftOut, batchId, 'left out')) console.error(line);
            },
          });
          if (started) ({ rows, csvPath, retryOf } = started);
          return started;
        },
        // Read once start() ran: the rows it left out are known by then.
        get nothingToDo() {
          const which = code ? ` with code ${code}` : leftOutRows ? ' besides those left out' : '';
          return `${batchId}: no failed rows${which}; nothing to retry`;
        },
        detach: !!o.detach,
        json: !!o.json,
        startedLine: ({ attached, batchId: retryId }) =>
          `${attached ? 'Attached to' : 'Started'} ${retryId}: ${rows} failed rows of ${retryOf} (${csvPath})`,
      });
    } finally {
      await session.close();
    }
  });
}
