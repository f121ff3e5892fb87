// Every error vidbatch throws on purpose, except the gateway client's, which are in
// gateway/errors.ts.

/** Thrown by config loading when a required environment variable is missing or malformed. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Thrown by findTemporalCli when no Temporal CLI could be found or provisioned; lists what was tried. */
export class TemporalCliNotFoundError extends Error {
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
export class DevServerError extends Error {
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
export class CsvValidationError extends Error {
  override name = 'CsvValidationError';
  constructor(readonly problems: CsvProblem[]) {
    super(
      `${problems.length} problem${problems.length === 1 ? '' : 's'} in the input; nothing was submitted:\n` +
        problems.map((p) => `  ${p.file}:${p.line} [${p.column}] ${p.reason}`).join('\n'),
    );
  }
}

/** Thrown by downloadVerified when a video cannot be fetched or fails verification; `retryable` says whether trying again can help. */
export class DownloadError extends Error {
  override name = 'DownloadError';
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** Thrown by the worker's path checks (activities/paths.ts) when workflow input names a path outside the worker's roots. */
export class PathNotAllowedError extends Error {
  override name = 'PathNotAllowedError';
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
export class OtherVersionBatchError extends Error {
  override name = 'OtherVersionBatchError';
  constructor(batchId: string, taskQueue: string, ours: string) {
    super(
      `${batchId} was started by vidbatch 0.x and is still open (its workflow runs on task queue "${taskQueue}"; ` +
        `this version's is "${ours}"), so this version cannot run it. Either finish it with a 0.x worker ` +
        `(\`npx vidbatch@0 worker\` in the old version's checkout), or cancel it (\`vidbatch cancel ${batchId}\`) ` +
        'and run the file again: a re-run pays nothing twice (the jobs journal knows every job).',
    );
  }
}
