// Batch-option flags that `run` and `retry-failed` share (spend safety, polling, window, job deadline), and the
// StartBatchOptions they make. Each flag's help names its environment variable (commander's `.env()`).
import { type Command, Option } from 'commander';
import type { StartBatchOptions } from '../client/batches';
import {
  DEFAULT_BATCH_OPTIONS,
  DEFAULT_MAX_UNKNOWN_RESENDS,
  DEFAULT_ON_UNKNOWN_SUBMIT,
  DEFAULT_PAUSE_AFTER_UNKNOWN,
  DEFAULT_SUBMIT_TIMEOUT_MS,
  DEFAULT_UNREACHABLE_PAUSE_MS,
  type VerifyMode,
} from '../contract/batch-options';
import { fraction, numberIn, positive, positiveSeconds, seconds, wholeNumber } from './support';

/** The window: what the setConcurrency update accepts too (BatchState.checkConcurrency). */
const windowSize = numberIn({ whole: true, min: 1, max: 10_000 });

/** `--concurrency`, the poll schedule and `--job-deadline`. */
export function addScheduleFlags(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--concurrency <n>',
        'most jobs in flight (submitted, not finished) at once; how fast requests go is up to the worker',
      )
        .env('VIDBATCH_CONCURRENCY')
        .argParser(windowSize)
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
        .argParser(positiveSeconds),
    )
    .addOption(
      new Option('--poll-backoff <x>', 'growing by this factor (>= 1)').argParser(numberIn({ min: 1 })),
    )
    .addOption(new Option('--poll-cap <s>', 'up to this interval').argParser(positiveSeconds))
    .addOption(new Option('--poll-jitter <f>', '± this fraction of jitter (0-1)').argParser(fraction))
    .option(
      '--no-adaptive-poll',
      'keep to the schedule above; by default it holds only until the worker has learned how long jobs take',
    )
    .addOption(
      new Option(
        '--job-deadline <s>',
        'fail a job not finished this long after submission (time held back by Retry-After or a pause does not count)',
      )
        .env('VIDBATCH_JOB_DEADLINE')
        .argParser(positiveSeconds)
        .default(DEFAULT_BATCH_OPTIONS.jobDeadlineMs, '3600'),
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
        .env('VIDBATCH_ON_UNKNOWN_SUBMIT')
        .choices(['resend', 'fail']),
    )
    .addOption(
      new Option(
        '--max-unknown-resends <n>',
        `with resend: at most this many resends per row; on a gateway that ignores Idempotency-Key each may be billed (default ${DEFAULT_MAX_UNKNOWN_RESENDS})`,
      )
        .env('VIDBATCH_MAX_UNKNOWN_RESENDS')
        .argParser(wholeNumber),
    )
    .addOption(
      new Option(
        '--submit-timeout <s>',
        `start-to-close of one submit attempt (default ${DEFAULT_SUBMIT_TIMEOUT_MS / 1000}); the worker's HTTP wait for a submit (GATEWAY_SUBMIT_TIMEOUT_MS) is kept inside it`,
      )
        .env('VIDBATCH_SUBMIT_TIMEOUT')
        .argParser(positiveSeconds),
    )
    .addOption(
      new Option(
        '--pause-after-unknown <n>',
        `pause submitting after this many submits in a row had an unknown outcome (a gateway that takes the money and gives no answer); 0 = never (default ${DEFAULT_PAUSE_AFTER_UNKNOWN})`,
      )
        .env('VIDBATCH_PAUSE_AFTER_UNKNOWN')
        .argParser(wholeNumber),
    )
    .addOption(
      new Option(
        '--unreachable-pause <s>',
        `pause the batch when submits could not be sent for this long (connection refused, DNS); it goes on by itself once the gateway answers (default ${DEFAULT_UNREACHABLE_PAUSE_MS / 1000})`,
      )
        .env('VIDBATCH_UNREACHABLE_PAUSE')
        .argParser(positiveSeconds),
    )
    .addOption(
      new Option(
        '--shared-budget',
        'deprecated, ignored: every batch now shares the rate budget the Temporal server enforces for all workers',
      ).env('VIDBATCH_SHARED_BUDGET'),
    )
    .addOption(
      new Option(
        '--priority <1-5>',
        "priority of this batch's gateway calls on the shared rate budget, 1 goes first (default 3)",
      )
        .env('VIDBATCH_PRIORITY')
        .argParser(oneToFive),
    )
    .addOption(
      new Option(
        '--weight <w>',
        'share of the rate budget against batches of the same priority, relative to their weights (default 1)',
      )
        .env('VIDBATCH_WEIGHT')
        .argParser(positive),
    );
}

/**
 * `--verify`: what a downloaded video that differs from its request does (README "Verification of downloaded
 * videos"). `run` has it; `retry-failed` too, and without it a retry keeps the original batch's mode.
 */
export function verifyOption(): Option {
  return new Option(
    '--verify <mode>',
    'with --download, each video is checked against its row (duration, resolution): flag records a mismatch on the row (default); strict also ends the row as failed with code video_mismatch (job and file kept; never re-submitted by itself: `retry-failed --code video_mismatch` regenerates it)',
  )
    .env('VIDBATCH_VERIFY')
    .choices(['flag', 'strict']);
}

/** A priority: a whole number from 1 to 5. */
const oneToFive = numberIn({ whole: true, min: 1, max: 5 });

/**
 * The options given on the command line or in the environment, without commander's defaults: a re-run of a
 * batch keeps the batch's own options, and only what the user gave again may change them (startBatch).
 */
export function givenOptions(command: Command, o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(o).filter(([name]) => command.getOptionValueSource(name) !== 'default'),
  );
}

/** The batch options the shared flags set; unset flags leave the defaults. */
export function scheduleAndSpendOptions(o: Record<string, unknown>): StartBatchOptions {
  // Accepted for one release so scripts keep working; the budget is every batch's now (issue 18).
  if (o.sharedBudget)
    process.stderr.write(
      'warning: --shared-budget (VIDBATCH_SHARED_BUDGET) is deprecated and ignored: every batch shares the rate budget now\n',
    );
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
  };
}
