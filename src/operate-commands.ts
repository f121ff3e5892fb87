// Operator commands of the CLI: status, watch, pause, resume, cancel, set-concurrency, list, results,
// retry-failed, doctor. Each parses flags and calls operations/starter/doctor functions.
import { dirname, join } from 'node:path';
import { Command, Option } from 'commander';
import { EXIT, fail } from './commands';
import { runDoctor } from './cli/doctor';
import { plan } from './input/plan';
import { batchStatus, findManifest, listBatches, type BatchStatus } from './client/batch-status';
import { batchHandle, resolveBatchId } from './client/batches';
import { historyStats } from './client/history-stats';
import { downloadBatch } from './results/download';
import { exportResults, failedRowsCsv } from './results/export';
import { createProgressView, progressLine } from './cli/progress-view';
import { pauseSignal, resumeUpdate, setConcurrencyUpdate } from './contract/messages';
import { followBatch, startBatch } from './client/batches';
import { openSession, type Session } from './client/session';
import { loadValidCsv } from './input/csv';

/** Opens a session without a worker, runs `fn`, closes it; errors become exit codes. */
async function withSession<T>(fn: (session: Session) => Promise<T>): Promise<T> {
  const session = await openSession({ worker: false }).catch(fail);
  try {
    return await fn(session);
  } finally {
    await session.close();
  }
}

function printStatus(s: BatchStatus): void {
  console.log(
    `${s.batchId}: ${s.workflowStatus} (started ${s.startTime.toISOString()}${s.closeTime ? `, closed ${s.closeTime.toISOString()}` : ''})`,
  );
  if (s.progress) console.log(progressLine(s.progress));
  else if (s.result)
    console.log(
      `${s.result.succeeded} succeeded, ${s.result.failed} failed of ${s.result.total}. Manifest: ${s.result.manifestPath}`,
    );
  const states = Object.entries(s.promptStates)
    .filter(([, n]) => n > 0)
    .map(([state, n]) => `${state} ${n}`);
  console.log(`prompt workflows: ${states.join(', ') || 'none yet'}`);
}

export function registerOperatorCommands(program: Command): void {
  const batchArg = ['<batch>', 'batch id (batch-...) or the CSV the batch was made from'] as const;

  program
    .command('status')
    .description('Where a batch stands: counts, throughput, ETA, rate limiting, pause reason.')
    .argument(...batchArg)
    .option('--history', 'also count history events of the batch and its prompts (one fetch per workflow)')
    .option('--json', 'print as JSON')
    .action(async (ref: string, o: { json?: boolean; history?: boolean }) => {
      const batchId = await resolveBatchId(ref);
      const [status, history] = await withSession(
        async (s) =>
          [
            await batchStatus(s.client, batchId),
            o.history ? await historyStats(s.client, batchId) : undefined,
          ] as const,
      );
      if (o.json) console.log(JSON.stringify(history ? { ...status, history } : status, null, 2));
      else {
        printStatus(status);
        if (history) {
          console.log(
            `history: ${history.eventsPerPrompt.toFixed(1)} events per prompt (batch ${history.batchEvents} in ${history.batchRuns} runs, prompts ${history.promptEvents}); largest run ${history.largestRunEvents} events`,
          );
        }
      }
      process.exitCode =
        status.workflowStatus === 'COMPLETED' || status.workflowStatus === 'RUNNING' ? EXIT.ok : EXIT.error;
    });

  program
    .command('watch')
    .description('Follow a batch with a live progress bar until it is done (Ctrl-C stops watching only).')
    .argument(...batchArg)
    .action(async (ref: string) => {
      const batchId = await resolveBatchId(ref);
      await withSession(async (session) => {
        const abort = new AbortController();
        process.once('SIGINT', () => abort.abort());
        const view = createProgressView();
        const result = await followBatch(
          batchHandle(session.client, batchId),
          (p) => view.update(p),
          abort.signal,
        );
        view.stop();
        if (result)
          console.log(
            `${batchId}: ${result.succeeded} succeeded, ${result.failed} failed of ${result.total}`,
          );
        process.exitCode = !result ? EXIT.interrupted : result.failed ? EXIT.rowsFailed : EXIT.ok;
      });
    });

  program
    .command('pause')
    .description('Stop submitting new prompts; prompts in flight keep being polled.')
    .argument(...batchArg)
    .option('--reason <text>', 'shown in the progress', 'paused by operator')
    .action(async (ref: string, o: { reason: string }) => {
      const batchId = await resolveBatchId(ref);
      await withSession((s) => batchHandle(s.client, batchId).signal(pauseSignal, o.reason));
      console.log(`${batchId}: pause requested`);
    });

  program
    .command('resume')
    .description('Resume a paused batch (after an operator pause, or once a refused API key was fixed).')
    .argument(...batchArg)
    .action(async (ref: string) => {
      const batchId = await resolveBatchId(ref);
      const progress = await withSession((s) => batchHandle(s.client, batchId).executeUpdate(resumeUpdate));
      console.log(`${batchId}: resumed. ${progressLine(progress)}`);
    });

  program
    .command('set-concurrency')
    .description('Change how many prompts a running batch keeps in flight.')
    .argument(...batchArg)
    .argument('<n>', 'prompts in flight (1-10000)')
    .action(async (ref: string, n: string) => {
      const batchId = await resolveBatchId(ref);
      const progress = await withSession((s) =>
        batchHandle(s.client, batchId).executeUpdate(setConcurrencyUpdate, { args: [Number(n)] }),
      ).catch((err: Error) => {
        console.error(`${batchId}: ${err.cause instanceof Error ? err.cause.message : err.message}`);
        process.exit(EXIT.invalidInput);
      });
      console.log(`${batchId}: window is now ${progress.concurrency}`);
    });

  program
    .command('cancel')
    .description(
      'Cancel a batch. Finished rows stay in the manifest; rows in flight are recorded as failed with code `cancelled` and their job id (jobs already submitted cannot be recalled and may still finish, and be billed, at the gateway).',
    )
    .argument(...batchArg)
    .action(async (ref: string) => {
      const batchId = await resolveBatchId(ref);
      await withSession((s) => batchHandle(s.client, batchId).cancel());
      console.log(`${batchId}: cancellation requested`);
    });

  program
    .command('list')
    .description('Recent batches with their state and counts, from Temporal visibility.')
    .option('--limit <n>', 'how many', '20')
    .option('--json', 'print as JSON')
    .action(async (o: { limit: string; json?: boolean }) => {
      const rows = await withSession((s) => listBatches(s.client, Number(o.limit)));
      if (o.json) return console.log(JSON.stringify(rows, null, 2));
      if (!rows.length) return console.log('no batches yet');
      for (const r of rows) {
        const counts = r.total === undefined ? '' : `${r.succeeded} ok, ${r.failed} failed of ${r.total}`;
        console.log(`${r.batchId}  ${r.workflowStatus.padEnd(16)} ${r.startTime.toISOString()}  ${counts}`);
      }
    });

  program
    .command('results')
    .description(
      "Export a batch's manifest as succeeded and failed files; the failed CSV is a valid input CSV.",
    )
    .argument(...batchArg)
    .addOption(new Option('--format <fmt>', 'file format').choices(['csv', 'jsonl']).default('csv'))
    .option('--dir <dir>', 'where to write (default: next to the manifest)')
    .addOption(
      new Option('--out-root <dir>', 'root of the output folders').env('VIDBATCH_OUT_ROOT').default('out'),
    )
    .option('--json', 'print a summary as JSON')
    .action(
      async (ref: string, o: { format: 'csv' | 'jsonl'; dir?: string; outRoot: string; json?: boolean }) => {
        const batchId = await resolveBatchId(ref);
        const manifest = await withSession((s) => findManifest(s.client, batchId, o.outRoot));
        const exported = await exportResults(manifest, o.dir ?? dirname(manifest), o.format);
        if (o.json) console.log(JSON.stringify(exported, null, 2));
        else
          console.log(
            `${exported.succeeded} succeeded, ${exported.failed} failed:\n${exported.files.map((f) => `  ${f}`).join('\n')}`,
          );
      },
    );

  program
    .command('download')
    .description(
      'Download every finished .mp4 of a batch, verified (status, type, size, MP4 signature, sha256); resumes and never overwrites a verified file.',
    )
    .argument(...batchArg)
    .option('--dir <dir>', 'where to put the videos (default: <manifest folder>/videos)')
    .option('--concurrency <n>', 'downloads at once', '4')
    .addOption(
      new Option('--out-root <dir>', 'root of the output folders').env('VIDBATCH_OUT_ROOT').default('out'),
    )
    .action(async (ref: string, o: { dir?: string; concurrency: string; outRoot: string }) => {
      const batchId = await resolveBatchId(ref);
      const manifest = await withSession((s) => findManifest(s.client, batchId, o.outRoot));
      const dir = o.dir ?? join(dirname(manifest), 'videos');
      const reports = await downloadBatch(manifest, dir, Number(o.concurrency));
      const failed = reports.filter((r) => r.error);
      console.log(
        `${reports.length - failed.length} videos verified in ${dir} (${reports.filter((r) => r.reused).length} already there), ${failed.length} failed`,
      );
      for (const f of failed) console.error(`  ${f.rowId}: ${f.error}`);
      process.exitCode = failed.length ? EXIT.rowsFailed : EXIT.ok;
    });

  program
    .command('retry-failed')
    .description(
      'Start a new batch from the failed rows of a batch (optionally only one error code), linked to it.',
    )
    .argument(...batchArg)
    .option('--code <errorCode>', 'only rows that failed with this code, e.g. deadline_exceeded')
    .addOption(
      new Option('--out-root <dir>', 'root of the output folders').env('VIDBATCH_OUT_ROOT').default('out'),
    )
    .option('--detach', 'start the new batch and exit')
    .action(async (ref: string, o: { code?: string; outRoot: string; detach?: boolean }) => {
      const batchId = await resolveBatchId(ref);
      await withSession(async (session) => {
        const manifest = await findManifest(session.client, batchId, o.outRoot);
        const csv = await failedRowsCsv(manifest, dirname(manifest), batchId, o.code);
        if (csv.rows === 0) {
          console.log(`${batchId}: no failed rows${o.code ? ` with code ${o.code}` : ''}; nothing to retry`);
          return;
        }
        const started = await startBatch(session, csv.path, { retryOf: batchId });
        console.log(
          `${started.attached ? 'Attached to' : 'Started'} ${started.batchId}: ${csv.rows} failed rows of ${batchId} (${csv.path})`,
        );
        if (o.detach) return;
        const result = await followBatch(started.handle, (p) => void p);
        if (result)
          console.log(
            `${started.batchId}: ${result.succeeded} succeeded, ${result.failed} failed of ${result.total}`,
          );
        process.exitCode = result?.failed ? EXIT.rowsFailed : EXIT.ok;
      });
    });

  program
    .command('doctor')
    .description(
      'Check before an overnight run: gateway settings, the key and models (GET /v1/models), Temporal, and the CSV.',
    )
    .argument('[csv]', 'input CSV to check too')
    .option('--json', 'print as JSON')
    .action(async (csvPath: string | undefined, o: { json?: boolean }) => {
      const checks = await runDoctor(process.env, csvPath);
      if (o.json) console.log(JSON.stringify(checks, null, 2));
      else for (const c of checks) console.log(`${c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.detail}`);
      process.exitCode = checks.every((c) => c.ok) ? EXIT.ok : EXIT.invalidInput;
    });

  program
    .command('plan')
    .description('What `run` would submit for a CSV, without starting anything (same as `run --dry-run`).')
    .argument('<csv>', 'input CSV')
    .action(async (csvPath: string) => {
      const { rows } = await loadValidCsv(csvPath).catch(fail);
      console.log(JSON.stringify(plan(rows), null, 2));
    });
}
