// `vidbatch run`: validate the CSV, open a session (embedded server, --simulate), start or attach to the
// batch and show its progress until it ends.
import { type Command, InvalidArgumentError, Option } from 'commander';
import { isSlack, noticeUrlProblem, shownUrl } from '../../notices/notice-urls';
import { dirname, resolve } from 'node:path';
import type { StartBatchOptions } from '../../client/batches';
import {
  DEFAULT_BATCH_OPTIONS,
  DEFAULT_MAX_VIDEO_BYTES,
  MAX_CONCURRENCY,
} from '../../contract/batch-options';
import {
  addRateBudgetFlags,
  addScheduleFlags,
  addSpendSafetyFlags,
  givenOptions,
  removedVariableWarnings,
  scheduleAndSpendOptions,
  verifyOption,
} from '../batch-flags';
import { addEnhanceFlags, enhanceFrom } from '../enhance-flags';
import { GROUP } from '../help-groups';
import { addPriceFlags, pricesFrom } from '../price-flags';
import {
  fail,
  fraction,
  hiddenAlias,
  nonNegative,
  numberIn,
  positiveSeconds,
  positiveWhole,
} from '../support';

/**
 * client/session's SIMULATED_JOB_SECONDS, for the help text: that module loads Temporal, which `--help` must
 * not wait for (a unit test keeps the two equal).
 */
export const SIM_JOB_SECONDS_HELP = 8;

export function registerRunCommand(program: Command): void {
  const command = program
    .command('run')
    .summary('Run a batch from a CSV and show its progress until it is done')
    .description(
      'Run a batch from a CSV and show its progress until it is done. Running the same file again attaches to the same batch; Ctrl-C leaves it durable. Without TEMPORAL_ADDRESS it uses the `vidbatch server` running here or starts an embedded one, and runs a worker in this process.',
    )
    .argument(
      '<csv>',
      'input CSV file, or s3://bucket/key.csv with VIDBATCH_STORE (header row; column `prompt` required)',
    )
    .option(
      '--simulate',
      'start the gateway simulator and use it instead of GATEWAY_BASE_URL/GATEWAY_API_KEY',
    )
    .option(
      '--detach',
      'start (or find) the batch and exit without following it; needs TEMPORAL_ADDRESS or a running `vidbatch server`, and workers (`vidbatch worker`)',
    )
    .option('--json', 'print the final result as JSON')
    .addOption(
      new Option(
        '--dry-run',
        'validate and print what would be submitted (counts per model, resolution, duration); start nothing (as `vidbatch plan`)',
      ).hideHelp(),
    )
    .addOption(
      new Option(
        '--sim-job-seconds <s>',
        `with --simulate: mean job latency (default ${SIM_JOB_SECONDS_HELP})`,
      )
        .argParser(nonNegative)
        .hideHelp(),
    )
    .addOption(
      new Option('--sim-rate-limit <rps>', 'with --simulate: requests/second limit')
        .argParser(nonNegative)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--out-root <dir>',
        "root of the output folders: this batch writes its manifest and jobs journal in <dir>/<batch-id>/ (default: the worker's root, VIDBATCH_OUT_ROOT or `out`); re-run with the same root to continue a batch",
      ).helpGroup(GROUP.output),
    )
    .addOption(
      new Option(
        '--download <dir>',
        "another root for the videos: each goes to <dir>/<batch-id>/<row-id>.mp4 instead of the batch's output folder",
      )
        .helpGroup(GROUP.output)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--no-download',
        "record only each video's URL (provider URLs expire: fetch them in time with `vidbatch download`); by default each video is downloaded as soon as its job completes into the batch's output folder (or --download <dir>), verified (sha256 in the manifest)",
      ).helpGroup(GROUP.output),
    )
    .addOption(
      new Option(
        '--max-video-bytes <n>',
        `largest video downloaded, in bytes; a larger one is not downloaded (default ${DEFAULT_MAX_VIDEO_BYTES}, 2 GiB)`,
      )
        .argParser(positiveWhole)
        .helpGroup(GROUP.output)
        .hideHelp(),
    )
    .addOption(verifyOption());
  hiddenAlias(command, new Option('--out <dir>', 'old name of --out-root'), 'outRoot');
  command
    .addOption(
      new Option('--max-failures <n>', 'stop submitting once this many rows failed')
        .helpGroup(GROUP.guardRails)
        .argParser(positiveWhole),
    )
    .addOption(
      new Option(
        '--max-failure-rate <p>',
        'stop submitting once more than this share (0-1) of finished rows failed, from 10 finished rows on',
      )
        .helpGroup(GROUP.guardRails)
        .argParser(fraction)
        .hideHelp(), // docs/how-a-batch-runs.md
    )
    .addOption(
      new Option('--batch-deadline <s>', 'submit no new job this many seconds after the start')
        .helpGroup(GROUP.guardRails)
        .argParser(positiveSeconds),
    )
    .addOption(
      new Option('--max-submissions <n>', 'spend cap: submit at most this many jobs in the whole batch')
        .helpGroup(GROUP.spendSafety)
        .argParser(positiveWhole),
    )
    .addOption(
      new Option(
        '--fresh',
        'pay for every row again: reuse no video or job that other batches in the output root paid for the same request',
      ).helpGroup(GROUP.spendSafety),
    );
  command.addOption(
    new Option(
      '--notify <url>',
      'send a signed notice (Standard Webhooks; VIDBATCH_NOTIFY_SECRET on the workers) to this URL when the batch ends, a guard rail stops it, or it pauses for a person; repeatable; a Slack incoming webhook gets a short message',
    )
      .env('VIDBATCH_NOTIFY')
      .argParser(noticeUrls)
      .helpGroup(GROUP.notices),
  );
  addSpendSafetyFlags(command);
  addRateBudgetFlags(command);
  addEnhanceFlags(command, 'before paying for its video');
  addScheduleFlags(command);
  command
    .addOption(
      new Option('--activity-timeout <s>', 'timeout of one gateway call activity')
        .argParser(positiveSeconds)
        .default(DEFAULT_BATCH_OPTIONS.activityTimeoutMs, '30')
        .hideHelp(),
    )
    .addOption(
      new Option('--page-size <n>', 'rows read per page')
        .argParser(positiveWhole)
        .default(DEFAULT_BATCH_OPTIONS.pageSize)
        .hideHelp(),
    )
    .addOption(
      new Option('--prompts-per-run <n>', 'prompts started per workflow run before continue-as-new')
        // Each run's children count against the server's pending-children limit until they end.
        .argParser(numberIn({ whole: true, min: 1, max: MAX_CONCURRENCY }))
        .default(DEFAULT_BATCH_OPTIONS.promptsPerRun)
        .hideHelp(),
    );
  addPriceFlags(command, { hidePrice: true }).action(
    (csvPath: string, o: Record<string, unknown>, cmd: Command) => run(csvPath, givenOptions(cmd, o)),
  );
}

async function run(csvPath: string, o: Record<string, unknown>): Promise<void> {
  for (const line of removedVariableWarnings()) console.error(line);
  const [
    { startBatch },
    { SIMULATED_JOB_SECONDS, SIMULATOR_STATE_FILE },
    { CsvValidationError },
    { loadCsv },
  ] = await Promise.all([
    import('../../client/batches'),
    import('../../client/session'),
    import('../../errors'),
    import('../../input/csv'),
  ]);
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
  const prices = await pricesFrom(o);
  await checkNoticeSecret(o.notify as string[] | undefined);
  const enhance = await enhanceFrom(o);
  // The rows as the provider gets them (its defaults, its refusals as problems), `--simulate` included.
  const { loadProvider } = await import('../../config');
  const provider = await Promise.resolve()
    .then(() => loadProvider())
    .catch(fail);
  // Let go once the batch has started (below): a batch of any size is followed in little memory.
  const { isStoreUrl } = await import('../../store/store-url');
  let source: import('../../store/inputs').CsvSource = csvPath;
  let parsed: Awaited<ReturnType<typeof loadCsv>> | undefined;
  if (isStoreUrl(csvPath)) {
    // Validated as it streams from the bucket; copied into the store when the batch starts.
    const [{ openCsvUrl }, { loadWorkerSettings }] = await Promise.all([
      import('../../store/inputs'),
      import('../../config'),
    ]);
    ({ source, csv: parsed } = await openCsvUrl(csvPath, loadWorkerSettings().store, { provider }).catch(
      fail,
    ));
  } else parsed = await loadCsv(csvPath, { provider });
  if (parsed.problems.length) fail(new CsvValidationError(parsed.problems));
  const reviewed = parsed.rows.filter((r) => r.originalPrompt !== undefined).length;
  if (enhance && reviewed)
    console.error(
      `${reviewed} of ${parsed.rows.length} rows have an original_prompt: their prompt is sent as written, not rewritten again (--enhance rewrites the others)`,
    );
  if (o.dryRun) {
    const [{ printPlan }, { plannedTarget }] = await Promise.all([
      import('../plan-report'),
      import('../../client/target'),
    ]);
    const target = await Promise.resolve()
      .then(() => plannedTarget(!!o.simulate, SIMULATOR_STATE_FILE))
      .catch(fail);
    await printPlan(parsed, target, {
      ...(o.outRoot ? { outRoot: o.outRoot as string } : {}),
      fresh: !!o.fresh,
      ...(prices ? { prices } : {}),
      ...(enhance ? { enhance } : {}),
    });
    return;
  }
  const { followInTerminal, openBatchSession } = await import('../follow');
  // An in-process worker may read this CSV wherever it is, and write where this command was told to (videos
  // without --download go beside the manifest, under the out root).
  const allow = {
    input: isStoreUrl(csvPath) ? [] : [dirname(resolve(csvPath))],
    out: o.outRoot ? [resolve(o.outRoot as string)] : [],
    download: typeof o.download === 'string' ? [resolve(o.download)] : [],
  };
  const session = await openBatchSession({ simulate, detach: !!o.detach, allow });
  const rowCount = parsed.rows.length;
  try {
    await followInTerminal(session, {
      start: () =>
        startBatch(
          session,
          source,
          { ...batchOptionsFrom(o), ...(enhance ? { enhance } : {}) },
          parsed,
        ).finally(() => (parsed = undefined)),
      detach: !!o.detach,
      json: !!o.json,
      prices,
      startedLine: ({ batchId, attached, runsOn, target }) =>
        `${attached ? 'Attached to' : 'Started'} batch ${batchId} (${rowCount} prompts) for ${target.target}` +
        (target.from === 'declared'
          ? ` (the target the workers on task queue "${session.taskQueue}" declare)`
          : target.from === 'environment'
            ? ' (GATEWAY_BASE_URL: no worker polls the task queue yet)'
            : '') +
        (runsOn
          ? `; it runs for the gateway it was started with (task queue "${runsOn}"), on that process's workers: ` +
            "following it here, this process's gateway sends none of its rows"
          : ''),
    });
  } finally {
    await session.close();
  }
}

/** The batch options the flags set; unset flags leave the defaults (or, on a re-run, the batch's own). */
function batchOptionsFrom(o: Record<string, unknown>): StartBatchOptions {
  return {
    ...scheduleAndSpendOptions(o),
    activityTimeoutMs: o.activityTimeout as number | undefined,
    pageSize: o.pageSize as number | undefined,
    promptsPerRun: o.promptsPerRun as number | undefined,
    ...(o.outRoot ? { outDir: o.outRoot as string } : {}),
    // --download <dir>: another root; --no-download: URLs only; neither: the batch's own (or the default).
    ...(typeof o.download === 'string' ? { download: true, downloadDir: resolve(o.download) } : {}),
    ...(o.download === false ? { download: false } : {}),
    ...(o.maxVideoBytes !== undefined ? { maxVideoBytes: o.maxVideoBytes as number } : {}),
    maxFailures: o.maxFailures as number | undefined,
    maxFailureRate: o.maxFailureRate as number | undefined,
    maxSubmissions: o.maxSubmissions as number | undefined,
    ...(o.fresh ? { reuse: false } : {}),
    ...(o.batchDeadline !== undefined ? { deadlineAt: Date.now() + (o.batchDeadline as number) } : {}),
    ...(o.notify ? { notify: o.notify as string[] } : {}),
  };
}

/**
 * Signed notices need the workers' secret: this process checks its own (a bad one is named), and without a
 * deployment (no TEMPORAL_ADDRESS: this process runs the worker) it must have one. A Slack URL needs none.
 */
async function checkNoticeSecret(urls: string[] | undefined): Promise<void> {
  if (!urls?.some((url) => !isSlack(url))) return;
  const [{ loadNoticeSecret }, { ConfigError }] = await Promise.all([
    import('../../notices/deliver'),
    import('../../errors'),
  ]);
  const secret = await Promise.resolve()
    .then(() => loadNoticeSecret())
    .catch(fail);
  if (!secret && !process.env.TEMPORAL_ADDRESS)
    fail(
      new ConfigError(
        '--notify: notices are signed (Standard Webhooks): set VIDBATCH_NOTIFY_SECRET (or VIDBATCH_NOTIFY_SECRET_FILE) to a whsec_ secret, the one your receiver verifies with',
      ),
    );
}

/**
 * `--notify`, given again (each adds one) or VIDBATCH_NOTIFY (URLs separated by spaces or commas): every URL
 * checked here, so a batch never starts with one it cannot send to.
 */
function noticeUrls(value: string, previous: unknown): string[] {
  const urls = value.split(/[\s,]+/).filter(Boolean);
  for (const url of urls) {
    const problem = noticeUrlProblem(url);
    if (problem) throw new InvalidArgumentError(`${shownUrl(url)} ${problem}`);
  }
  return [...(Array.isArray(previous) ? (previous as string[]) : []), ...urls];
}
