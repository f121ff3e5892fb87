// `vidbatch run`: validate the CSV, open a session (embedded server, --simulate), start or attach to the
// batch and show its progress until it ends.
import { type Command, Option } from 'commander';
import { resolve } from 'node:path';
import { batchIdFor, type StartBatchOptions } from '../../client/batches';
import { openSession, SIMULATED_JOB_SECONDS } from '../../client/session';
import { DEFAULT_BATCH_OPTIONS } from '../../contract/types';
import { CsvValidationError } from '../../errors';
import { loadCsv } from '../../input/csv';
import { plan } from '../../input/plan';
import { startAndFollow } from '../../starter';
import { createProgressView } from '../progress-view';
import { EXIT, fail, nonNegative, seconds, summaryLine } from '../support';

export function registerRunCommand(program: Command): void {
  program
    .command('run')
    .description(
      'Run a batch from a CSV and show its progress until it is done. Running the same file again attaches to the same batch; Ctrl-C leaves it durable.',
    )
    .argument('<csv>', 'input CSV file (header row; column `prompt` required)')
    .option(
      '--simulate',
      'start the gateway simulator and use it instead of GATEWAY_BASE_URL/GATEWAY_API_KEY',
    )
    .addOption(
      new Option(
        '--sim-job-seconds <s>',
        `with --simulate: mean job latency (default ${SIMULATED_JOB_SECONDS})`,
      ).argParser(nonNegative),
    )
    .addOption(
      new Option('--sim-rate-limit <rps>', 'with --simulate: requests/second limit').argParser(nonNegative),
    )
    .addOption(
      new Option(
        '--concurrency <n>',
        'most jobs in flight (submitted, not finished) at once; how fast requests go is up to the worker',
      )
        .env('VIDBATCH_CONCURRENCY')
        .argParser(nonNegative)
        .default(DEFAULT_BATCH_OPTIONS.concurrency),
    )
    .addOption(
      new Option('--first-poll <s>', 'first status check this long after submission')
        .env('VIDBATCH_FIRST_POLL')
        .argParser(seconds),
    )
    .addOption(
      new Option('--poll-interval <s>', 'then check every ... seconds')
        .env('VIDBATCH_POLL_INTERVAL')
        .argParser(seconds),
    )
    .addOption(new Option('--poll-backoff <x>', 'growing by this factor').argParser(nonNegative))
    .addOption(new Option('--poll-cap <s>', 'up to this interval').argParser(seconds))
    .addOption(new Option('--poll-jitter <f>', '± this fraction of jitter').argParser(nonNegative))
    .option(
      '--no-adaptive-poll',
      'keep to the schedule above; by default it holds only until the worker has learned how long jobs take',
    )
    .addOption(
      new Option('--job-deadline <s>', 'fail a job not finished this long after submission')
        .env('VIDBATCH_JOB_DEADLINE')
        .argParser(seconds)
        .default(DEFAULT_BATCH_OPTIONS.jobDeadlineMs, '3600'),
    )
    .addOption(
      new Option('--activity-timeout <s>', 'timeout of one gateway call activity')
        .argParser(seconds)
        .default(DEFAULT_BATCH_OPTIONS.activityTimeoutMs, '30'),
    )
    .addOption(
      new Option('--page-size <n>', 'rows read per page')
        .argParser(nonNegative)
        .default(DEFAULT_BATCH_OPTIONS.pageSize),
    )
    .addOption(
      new Option('--prompts-per-run <n>', 'prompts per workflow run before continue-as-new')
        .argParser(nonNegative)
        .default(DEFAULT_BATCH_OPTIONS.promptsPerRun),
    )
    .addOption(new Option('--out <dir>', 'output folder (default out/<batch-id>)').env('VIDBATCH_OUT_DIR'))
    .option(
      '--dry-run',
      'validate and print what would be submitted (counts per model, resolution, duration); start nothing',
    )
    .option('--detach', 'start (or find) the batch and exit without following it')
    .option('--json', 'print the final result as JSON')
    .action((csvPath: string, o: Record<string, unknown>) => run(csvPath, o));
}

async function run(csvPath: string, o: Record<string, unknown>): Promise<void> {
  const simJobSeconds = (o.simJobSeconds as number | undefined) ?? SIMULATED_JOB_SECONDS;
  const simulate = o.simulate
    ? {
        jobSeconds: simJobSeconds,
        jobJitterSeconds: simJobSeconds / 2,
        ...(o.simRateLimit !== undefined ? { rateLimit: o.simRateLimit as number } : {}),
      }
    : false;
  // The default poll schedule suits real providers (minutes per job); simulated jobs take seconds.
  if (o.simulate) {
    o.firstPoll ??= simJobSeconds * 1000;
    o.pollInterval ??= Math.max(500, simJobSeconds * 250);
  }
  // Validate before starting any server: nothing is submitted from a file with errors.
  const parsed = await loadCsv(csvPath);
  if (parsed.problems.length) fail(new CsvValidationError(parsed.problems));
  if (o.dryRun) {
    console.log(JSON.stringify({ batchId: batchIdFor(parsed), ...plan(parsed.rows) }, null, 2));
    return;
  }
  const session = await openSession({ simulate, worker: o.simulate ? true : undefined }).catch(fail);
  const abort = new AbortController();
  const onSigint = () => abort.abort();
  process.once('SIGINT', onSigint);
  const view = createProgressView();
  try {
    const { started, result } = await startAndFollow(session, csvPath, batchOptionsFrom(o), {
      parsed,
      detach: !!o.detach,
      signal: abort.signal,
      onProgress: (p) => view.update(p),
      onStarted: ({ batchId, attached }) => {
        console.error(
          `${attached ? 'Attached to' : 'Started'} batch ${batchId} (${parsed.rows.length} prompts)`,
        );
        if (session.uiUrl)
          console.error(
            `Temporal Web UI: ${session.uiUrl}/namespaces/${session.namespace}/workflows/${batchId}`,
          );
      },
    });
    if (o.detach) return;
    view.stop();
    const { batchId } = started;
    if (!result) {
      console.error(
        `\nStopped following ${batchId}. The batch is durable: run the same command again to continue.`,
      );
      process.exitCode = EXIT.interrupted;
      return;
    }
    if (o.json) console.log(JSON.stringify(result, null, 2));
    else {
      console.log(`${batchId}: ${summaryLine(result, true)}`);
      if (result.stoppedReason)
        console.log(`Stopped early: ${result.stoppedReason}; ${result.notStarted} rows not submitted.`);
    }
    if (session.simulator) {
      const stats = session.simulator.stats();
      console.error(
        `Simulator: ${stats.jobsCreated} jobs created, ${stats.rateLimited} 429s sent, ${stats.idempotentReplays} idempotent replays`,
      );
    }
    process.exitCode = result.failed > 0 || result.notStarted > 0 ? EXIT.rowsFailed : EXIT.ok;
  } finally {
    view.stop();
    process.removeListener('SIGINT', onSigint);
    await session.close();
  }
}

/** The batch options the flags set; unset flags leave the defaults. */
function batchOptionsFrom(o: Record<string, unknown>): StartBatchOptions {
  const poll: StartBatchOptions['poll'] = {};
  if (o.firstPoll !== undefined) poll.firstPollMs = o.firstPoll as number;
  if (o.pollInterval !== undefined) poll.intervalMs = o.pollInterval as number;
  if (o.pollBackoff !== undefined) poll.backoff = o.pollBackoff as number;
  if (o.pollCap !== undefined) poll.capMs = o.pollCap as number;
  if (o.pollJitter !== undefined) poll.jitter = o.pollJitter as number;
  if (o.adaptivePoll === false) poll.adaptive = false;
  return {
    concurrency: o.concurrency as number,
    jobDeadlineMs: o.jobDeadline as number,
    activityTimeoutMs: o.activityTimeout as number,
    pageSize: o.pageSize as number,
    promptsPerRun: o.promptsPerRun as number,
    ...(o.out ? { outDir: o.out as string } : {}),
    ...(o.download ? { downloadDir: resolve(o.download as string) } : {}),
    maxFailures: o.maxFailures as number | undefined,
    maxFailureRate: o.maxFailureRate as number | undefined,
    maxSubmissions: o.maxSubmissions as number | undefined,
    ...(o.batchDeadline !== undefined ? { deadlineAt: Date.now() + (o.batchDeadline as number) } : {}),
    poll,
  };
}
