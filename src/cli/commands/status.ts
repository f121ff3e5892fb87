// `vidbatch status`.
import { type Command } from 'commander';
import type { BatchStatus } from '../../client/batch-status';
import { addPriceFlags, pricesFrom } from '../price-flags';
import { arrivedLateLine, batchArg, EXIT, spendSafetyLines, summaryLine, withBatch } from '../support';

export function registerStatusCommand(program: Command): void {
  const command = program
    .command('status')
    .summary('Where a batch stands: counts, ETA, holds, spend ledger')
    .description(
      'Where a batch stands: counts, throughput, ETA, rate limiting and gateway holds, pause reason, rows that may have been billed more than once, rows skipped because an earlier run finished them, and the spend ledger (every job the gateway made for the batch).',
    )
    .argument(...batchArg)
    .option('--history', 'also count history events of the batch and its prompts (one fetch per workflow)')
    .option('--json', 'print as JSON');
  addPriceFlags(command).action(
    async (ref: string, o: { json?: boolean; history?: boolean; price?: string[]; prices?: string }) => {
      const [{ batchStatus }, { historyStats }, { noticeOutcomes, noticeLines }] = await Promise.all([
        import('../../client/batch-status'),
        import('../../client/history-stats'),
        import('../../client/notice-status'),
      ]);
      const prices = await pricesFrom(o);
      const [status, history, notices] = await withBatch(ref, async (s, batchId) => {
        const status = await batchStatus(s.client, batchId, undefined, { prices, taskQueue: s.taskQueue });
        const ids = status.progress?.notices ?? status.result?.notices ?? [];
        return [
          status,
          o.history ? await historyStats(s.client, batchId) : undefined,
          ids.length ? await noticeOutcomes(s.client, ids) : undefined,
        ] as const;
      });
      if (o.json)
        console.log(
          JSON.stringify(
            { ...status, ...(history ? { history } : {}), ...(notices ? { notices } : {}) },
            null,
            2,
          ),
        );
      else {
        await printStatus(status);
        for (const line of noticeLines(notices ?? [])) console.log(line);
        if (history) {
          console.log(
            `history: ${history.eventsPerPrompt.toFixed(1)} events per prompt (batch ${history.batchEvents} in ${history.batchRuns} runs, prompts ${history.promptEvents}); largest run ${history.largestRunEvents} events`,
          );
        }
      }
      process.exitCode =
        status.workflowStatus === 'COMPLETED' || status.workflowStatus === 'RUNNING' ? EXIT.ok : EXIT.error;
    },
  );
}

async function printStatus(s: BatchStatus): Promise<void> {
  const [{ verificationLines }, { formatLedger }, { progressLine }] = await Promise.all([
    import('../../results/verification-summary'),
    import('../../results/ledger'),
    import('../progress-view'),
  ]);
  console.log(
    `${s.batchId}: ${s.workflowStatus} (started ${s.startTime.toISOString()}${s.closeTime ? `, closed ${s.closeTime.toISOString()}` : ''})`,
  );
  if (s.target) console.log(`target: ${s.target}`);
  if (s.progress) console.log(progressLine(s.progress));
  else if (s.result) {
    console.log(summaryLine(s.result, true));
    // Videos that arrived after their rows ended changed those rows since the batch returned its counts.
    if (s.final?.arrivedLate)
      console.log(
        `manifest (final state per row): ${summaryLine({ ...s.final, total: s.final.rows }, false)}`,
      );
  } else {
    // Running, yet no worker answered the progress query (client/batches.ts getProgress bounds the wait).
    if (s.workflowStatus === 'RUNNING')
      console.log(
        'progress: no worker answered (has the process that ran it ended? Run its file again to go on, or `vidbatch cancel` it)',
      );
    if (s.final)
      console.log(
        `manifest (final state per row): ${summaryLine({ ...s.final, total: s.final.rows }, false)}`,
      );
  }
  for (const line of spendSafetyLines(s.progress ?? s.result ?? s.final ?? {})) console.log(line);
  for (const line of verificationLines(s.final?.verification)) console.log(line);
  const arrived = arrivedLateLine(s.final?.arrivedLate ?? 0);
  if (arrived) console.log(arrived);
  const lateJobs = s.final?.lateJobs ?? 0;
  if (lateJobs > 0) {
    const watched = s.promptStates.late;
    console.log(
      `${lateJobs} ${lateJobs === 1 ? 'row' : 'rows'} ended (deadline_exceeded or cancelled) with a job that may still finish: ` +
        (watched
          ? `${watched} checked for a late video by ${watched === 1 ? 'its prompt' : 'their prompts'} while a worker runs`
          : 'none is checked now') +
        `; \`vidbatch download ${s.batchId}\` fetches what arrived`,
    );
  }
  if (s.ledger) console.log(formatLedger(s.ledger));
  if (s.budget) {
    const { share, rps, limit, batches, why } = s.budget;
    console.log(
      `gateway budget (shared): ${Math.round(share * 100)}% of the gateway calls over the last 30 s ` +
        `(${rps.toFixed(2)} requests/s of a ${limit === null ? 'not yet set' : `${limit} requests/s`} limit; ` +
        `${batches} batch${batches === 1 ? '' : 'es'} calling)`,
    );
    if (why) console.log(`gateway limit: ${why.replace(/^vidbatch: /, '')}`);
  }
  const states = Object.entries(s.promptStates)
    .filter(([, n]) => n > 0)
    .map(([state, n]) => `${state} ${n}`);
  console.log(`prompt workflows: ${states.join(', ') || 'none yet'}`);
}
