// Every error vidbatch throws on purpose, except the gateway client's, which are in
// gateway/errors.ts. Each carries the exit code a command ends with when it reaches the top (exitCodeFor).

/** Exit codes, as the README's "Exit codes" table documents them. */
export const EXIT = { ok: 0, error: 1, invalidInput: 2, rowsFailed: 3, interrupted: 130 } as const;

/** The root of vidbatch's own errors: what the command's exit code is when one ends it. */
export class VidbatchError extends Error {
  override name = 'VidbatchError';
  readonly exitCode: number = EXIT.error;
}

/**
 * The exit code of a command that ended with `err`: the one place errors become exit codes. Anything with a
 * numeric `exitCode` (VidbatchError, gateway errors that carry one) keeps it; commander's usage errors (bad
 * flag or value) are invalid input, its help and version exits keep theirs; anything else is unexpected.
 */
export function exitCodeFor(err: unknown): number {
  const { code, exitCode } = (err ?? {}) as { code?: unknown; exitCode?: unknown };
  if (typeof code === 'string' && code.startsWith('commander.'))
    return /^commander\.(help|helpDisplayed|version)$/.test(code) && typeof exitCode === 'number'
      ? exitCode
      : EXIT.invalidInput;
  return typeof exitCode === 'number' && Number.isInteger(exitCode) ? exitCode : EXIT.error;
}

/** Thrown by config loading when a required environment variable is missing or malformed. */
export class ConfigError extends VidbatchError {
  override name = 'ConfigError';
  override readonly exitCode: number = EXIT.invalidInput;
}

/** Thrown by findTemporalCli when no Temporal CLI could be found or provisioned; lists what was tried. */
export class TemporalCliNotFoundError extends VidbatchError {
  override name = 'TemporalCliNotFoundError';
  constructor(readonly tried: string[]) {
    super(
      [
        'No Temporal CLI could be found or provisioned. Tried:',
        ...tried.map((t) => `  - ${t}`),
        'Fix one of: set TEMPORAL_CLI_PATH to a temporal binary; put `temporal` on PATH;',
        '  install Go (https://go.dev/dl) so vidbatch can build it with `go install`;',
        '  or give this machine internet access for the SDK download.',
      ].join('\n'),
    );
  }
}

/** Thrown by the dev-server launcher when the server exits or does not become ready in time. */
export class DevServerError extends VidbatchError {
  override name = 'DevServerError';
}

/** One problem found in an input CSV: where it is and why it is wrong. */
export interface CsvProblem {
  file: string;
  line: number;
  column: string;
  reason: string;
}

/** Thrown by the CSV loader when the file has any bad row; carries every problem found, not only the first. */
export class CsvValidationError extends VidbatchError {
  override name = 'CsvValidationError';
  override readonly exitCode: number = EXIT.invalidInput;
  constructor(readonly problems: CsvProblem[]) {
    super(
      `${problems.length} problem${problems.length === 1 ? '' : 's'} in the input; nothing was submitted:\n` +
        problems.map((p) => `  ${p.file}:${p.line} [${p.column}] ${p.reason}`).join('\n'),
    );
  }
}

/**
 * Thrown by downloadVerified when a video cannot be fetched or fails verification; `retryable` says whether
 * trying again can help; `httpStatus`, the URL's answer when it refused the video (403, 404, 410: expired).
 */
export class DownloadError extends VidbatchError {
  override name = 'DownloadError';
  constructor(
    message: string,
    readonly retryable: boolean,
    readonly httpStatus?: number,
  ) {
    super(message);
  }
}

/** Thrown by the worker's path checks (activities/paths.ts) when workflow input names a path outside the worker's roots. */
export class PathNotAllowedError extends VidbatchError {
  override name = 'PathNotAllowedError';
  override readonly exitCode: number = EXIT.invalidInput;
  constructor(
    readonly path: string,
    readonly roots: string[],
    readonly envVar: string,
  ) {
    super(
      `${path} is outside the folders this worker may use (${roots.join(', ') || 'none'}); ` +
        `put it under ${roots.length === 1 ? 'that folder' : 'one of them'} or set ${envVar} on the worker`,
    );
  }
}

/**
 * Thrown by `run` and `status` when the batch is still open on another task queue than this version's: an
 * earlier major version (0.x) started it, and only that version's workers can run it.
 */
/**
 * The batch runs on another gateway's task queue (another key, output root or --simulate; see
 * client/task-queue.ts) and no worker polls it: following it here would wait forever.
 */
export class UnservedBatchError extends VidbatchError {
  override name = 'UnservedBatchError';
  override readonly exitCode = EXIT.invalidInput;
  constructor(batchId: string, taskQueue: string) {
    super(
      `${batchId} is running on another task queue ("${taskQueue}"), and no worker polls it: the process that ` +
        'started it has ended. Run the file again with the VIDBATCH_TASK_QUEUE it was started with, or cancel it ' +
        `(\`vidbatch cancel ${batchId}\`) and run it again with these: finished rows are kept and known jobs are ` +
        'checked, so nothing is paid twice.',
    );
  }
}

export class OtherVersionBatchError extends VidbatchError {
  override name = 'OtherVersionBatchError';
  override readonly exitCode = EXIT.invalidInput;
  constructor(batchId: string, taskQueue: string, ours: string) {
    super(
      `${batchId} was started by vidbatch 0.x and is still open (its workflow runs on task queue "${taskQueue}"; ` +
        `this version's is "${ours}"), so this version cannot run it. Either finish it with a 0.x worker ` +
        `(\`npx vidbatch@0 worker\` in the old version's checkout), or stop it (\`vidbatch cancel ${batchId}\`, which ` +
        'terminates a 0.x batch) and run the file again: a re-run pays nothing twice (the jobs journal knows every job).',
    );
  }
}
