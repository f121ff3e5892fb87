// Batch-option flags that `run` and `retry-failed` share (window, poll schedule, job deadline, spend safety,
// rate budget, verification), and the StartBatchOptions they make. No environment variable sets a batch
// option: a re-run of a CSV does what its command line says, whatever the shell has exported.
import { type Command, InvalidArgumentError, Option } from 'commander';
import type { StartBatchOptions } from '../client/batches';
import {
  DEFAULT_BATCH_OPTIONS,
  DEFAULT_MAX_UNKNOWN_RESENDS,
  DEFAULT_ON_UNKNOWN_SUBMIT,
  DEFAULT_PAUSE_AFTER_UNKNOWN,
  DEFAULT_SUBMIT_TIMEOUT_MS,
  DEFAULT_UNREACHABLE_PAUSE_MS,
  DEFAULT_LATE_CHECK_MS,
  DEFAULT_LATE_FOR_MS,
  LATE_CHECK_CAP,
  concurrencyProblem,
  type VerifyMode,
} from '../contract/batch-options';
import { GROUP } from './help-groups';
import {
  duration,
  durationText,
  fraction,
  numberIn,
  positive,
  positiveSeconds,
  seconds,
  wholeNumber,
} from './support';

/** The window: what the setConcurrency update accepts too (BatchState.checkConcurrency). */
export function windowSize(value: string): number {
  const n = value.trim() === '' ? NaN : Number(value);
  const problem = concurrencyProblem(n);
  if (problem) throw new InvalidArgumentError(problem);
  return n;
}

/** A priority: a whole number from 1 to 5. */
const oneToFive = numberIn({ whole: true, min: 1, max: 5 });

/** `--concurrency`, `--priority`, `--weight`: how much of the gateway this batch takes. */
export function addRateBudgetFlags(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--concurrency <n>',
        'most jobs in flight (submitted, not finished) at once; how fast requests go is up to the worker',
      )
        .helpGroup(GROUP.rateBudget)
        .argParser(windowSize)
        .default(DEFAULT_BATCH_OPTIONS.concurrency),
    )
    .addOption(
      new Option(
        '--priority <1-5>',
        "priority of this batch's gateway calls on the shared rate budget, 1 goes first (default 3)",
      )
        .helpGroup(GROUP.rateBudget)
        .argParser(oneToFive)
        .hideHelp(), // docs/rate-budget.md
    )
    .addOption(
      new Option(
        '--weight <w>',
        'share of the rate budget against batches of the same priority, relative to their weights (default 1)',
      )
        .argParser(positive)
        .hideHelp(),
    );
}

/** The poll schedule and `--job-deadline`: tuning most batches never need, so hidden from `--help`. */
export function addScheduleFlags(command: Command): Command {
  return command
    .addOption(
      new Option('--first-poll <s>', 'first status check this long after submission')
        .argParser(seconds)
        .hideHelp(),
    )
    .addOption(
      new Option('--poll-interval <s>', 'then check every ... seconds').argParser(positiveSeconds).hideHelp(),
    )
    .addOption(
      new Option('--poll-backoff <x>', 'growing by this factor (>= 1)')
        .argParser(numberIn({ min: 1 }))
        .hideHelp(),
    )
    .addOption(new Option('--poll-cap <s>', 'up to this interval').argParser(positiveSeconds).hideHelp())
    .addOption(
      new Option('--poll-jitter <f>', '± this fraction of jitter (0-1)').argParser(fraction).hideHelp(),
    )
    .addOption(
      new Option(
        '--no-adaptive-poll',
        'keep to the schedule above; by default it holds only until the worker has learned how long jobs take',
      ).hideHelp(),
    )
    .addOption(
      new Option(
        '--job-deadline <s>',
        'fail a job not finished this long after submission (time held back by Retry-After or a pause does not count)',
      )
        .argParser(positiveSeconds)
        .default(DEFAULT_BATCH_OPTIONS.jobDeadlineMs, '3600')
        .hideHelp(),
    );
}

/** What a row does after a submit whose outcome is unknown (README "Spend safety"). */
export function addSpendSafetyFlags(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--on-unknown-submit <policy>',
        `after a submit whose outcome is unknown (timeout, reset, 5xx: a job may exist and be billed): resend with the same Idempotency-Key, or fail the row with code submit_unknown (default ${DEFAULT_ON_UNKNOWN_SUBMIT})`,
      )
        .helpGroup(GROUP.spendSafety)
        .choices(['resend', 'fail'])
        .hideHelp(), // docs/spend-safety.md: the default suits nearly everyone
    )
    .addOption(
      new Option(
        '--max-unknown-resends <n>',
        `with resend: at most this many resends per row; on a gateway that ignores Idempotency-Key each may be billed (default ${DEFAULT_MAX_UNKNOWN_RESENDS})`,
      )
        .argParser(wholeNumber)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--submit-timeout <s>',
        `start-to-close of one submit attempt (default ${DEFAULT_SUBMIT_TIMEOUT_MS / 1000}); the worker's HTTP wait for a submit (GATEWAY_SUBMIT_TIMEOUT_MS) is kept inside it`,
      )
        .argParser(positiveSeconds)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--pause-after-unknown <n>',
        `pause submitting after this many submits in a row had an unknown outcome (a gateway that takes the money and gives no answer); 0 = never (default ${DEFAULT_PAUSE_AFTER_UNKNOWN})`,
      )
        .argParser(wholeNumber)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--unreachable-pause <s>',
        `pause the batch when submits could not be sent for this long (connection refused, DNS); it goes on by itself once the gateway answers (default ${DEFAULT_UNREACHABLE_PAUSE_MS / 1000})`,
      )
        .argParser(positiveSeconds)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--late-for <duration>',
        `after a row ended deadline_exceeded or cancelled with a job id, keep checking that job this long (e.g. 90m, 24h; 0 = not at all, and a job past its deadline is stopped where the provider can cancel one) and keep its video if it arrives, while a worker runs (default ${durationText(DEFAULT_LATE_FOR_MS)})`,
      )
        .helpGroup(GROUP.spendSafety)
        .argParser(duration)
        .hideHelp(), // docs/spend-safety.md#late-videos: the default suits nearly everyone
    )
    .addOption(
      new Option(
        '--late-check <s>',
        `with --late-for: the first check of such a job this long after its row ended, each later one waiting half as long again, up to ${LATE_CHECK_CAP} times this (default ${DEFAULT_LATE_CHECK_MS / 1000})`,
      )
        .argParser(positiveSeconds)
        .hideHelp(),
    );
}

/**
 * `--verify`: what a downloaded video that differs from its request does (README "Verification of downloaded
 * videos"). `run` has it; `retry-failed` too, and without it a retry keeps the original batch's mode.
 */
export function verifyOption(): Option {
  return new Option(
    '--verify <mode>',
    'each downloaded video is checked against its row (duration, resolution): flag records a mismatch on the row (default); strict also ends the row as failed with code video_mismatch (job and file kept; never re-submitted by itself: `retry-failed --code video_mismatch` regenerates it)',
  )
    .helpGroup(GROUP.output)
    .choices(['flag', 'strict']);
}

/**
 * Variables that set batch options in earlier releases, and what to use instead. They are not read any more
 * (an exported variable silently changing a re-run is worse than a flag to type), but a user who still sets
 * one is told, once per variable, when a batch starts.
 */
export const REMOVED_BATCH_VARIABLES: Record<string, string> = {
  VIDBATCH_CONCURRENCY: '--concurrency',
  VIDBATCH_FIRST_POLL: '--first-poll',
  VIDBATCH_POLL_INTERVAL: '--poll-interval',
  VIDBATCH_JOB_DEADLINE: '--job-deadline',
  VIDBATCH_ON_UNKNOWN_SUBMIT: '--on-unknown-submit',
  VIDBATCH_MAX_UNKNOWN_RESENDS: '--max-unknown-resends',
  VIDBATCH_SUBMIT_TIMEOUT: '--submit-timeout',
  VIDBATCH_PAUSE_AFTER_UNKNOWN: '--pause-after-unknown',
  VIDBATCH_UNREACHABLE_PAUSE: '--unreachable-pause',
  VIDBATCH_PRIORITY: '--priority',
  VIDBATCH_WEIGHT: '--weight',
  VIDBATCH_VERIFY: '--verify',
  VIDBATCH_MAX_SUBMISSIONS: '--max-submissions',
  VIDBATCH_MAX_FAILURE_RATE: '--max-failure-rate',
  VIDBATCH_MAX_FAILURES: '--max-failures',
  VIDBATCH_BATCH_DEADLINE: '--batch-deadline',
  VIDBATCH_OUT_DIR: '--out-root',
  VIDBATCH_DOWNLOAD_DIR: '--download',
};

/** The warning lines for removed variables set in `env` (one per variable; none when none is set). */
export function removedVariableWarnings(env: NodeJS.ProcessEnv = process.env): string[] {
  const lines = Object.entries(REMOVED_BATCH_VARIABLES)
    .filter(([name]) => env[name] !== undefined)
    .map(([name, flag]) => `warning: ${name} is no longer read; use ${flag} instead`);
  if (env.VIDBATCH_SHARED_BUDGET !== undefined)
    lines.push(
      'warning: VIDBATCH_SHARED_BUDGET is no longer read; every batch shares the rate budget, with no flag',
    );
  return lines;
}

/**
 * The options given on the command line, without commander's defaults: a re-run of a batch keeps the batch's
 * own options, and only what the user gave again may change them (startBatch).
 */
export function givenOptions(command: Command, o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(o).filter(([name]) => command.getOptionValueSource(name) !== 'default'),
  );
}

/** The batch options the shared flags set; unset flags leave the defaults. */
export function scheduleAndSpendOptions(o: Record<string, unknown>): StartBatchOptions {
  const poll: StartBatchOptions['poll'] = {};
  if (o.firstPoll !== undefined) poll.firstPollMs = o.firstPoll as number;
  if (o.pollInterval !== undefined) poll.intervalMs = o.pollInterval as number;
  if (o.pollBackoff !== undefined) poll.backoff = o.pollBackoff as number;
  if (o.pollCap !== undefined) poll.capMs = o.pollCap as number;
  if (o.pollJitter !== undefined) poll.jitter = o.pollJitter as number;
  if (o.adaptivePoll === false) poll.adaptive = false;
  return {
    concurrency: o.concurrency as number | undefined,
    jobDeadlineMs: o.jobDeadline as number | undefined,
    poll,
    ...(o.onUnknownSubmit !== undefined ? { onUnknownSubmit: o.onUnknownSubmit as 'resend' | 'fail' } : {}),
    ...(o.maxUnknownResends !== undefined ? { maxUnknownResends: o.maxUnknownResends as number } : {}),
    ...(o.submitTimeout !== undefined ? { submitTimeoutMs: o.submitTimeout as number } : {}),
    ...(o.pauseAfterUnknown !== undefined ? { pauseAfterUnknown: o.pauseAfterUnknown as number } : {}),
    ...(o.unreachablePause !== undefined ? { unreachablePauseMs: o.unreachablePause as number } : {}),
    ...(o.priority !== undefined ? { priority: o.priority as number } : {}),
    ...(o.weight !== undefined ? { weight: o.weight as number } : {}),
    ...(o.verify !== undefined ? { verify: o.verify as VerifyMode } : {}),
    ...(o.lateFor !== undefined ? { lateForMs: o.lateFor as number } : {}),
    ...(o.lateCheck !== undefined ? { lateCheckMs: o.lateCheck as number } : {}),
  };
}
