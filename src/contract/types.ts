// The data that crosses Temporal: workflow inputs and results, activity inputs and outputs, progress, and
// their defaults. Imported by workflow code, so it must stay free of Node built-ins and I/O.

export const DEFAULT_TASK_QUEUE = 'vidbatch';

export const DEFAULT_MODEL = 'modelfamily-1.0-r2v';

/** One validated CSV row, as it travels through history. Never contains secrets. */
export interface PromptRow {
  /** Unique within the batch: the `id` column, or the row number. */
  id: string;
  /** 1-based line of the row in the file (where the record starts). */
  line: number;
  prompt: string;
  model: string;
  /** `input` object of the request: `prompt` plus any `input.<field>` columns. */
  input: Record<string, unknown>;
  /** `parameters` object of the request: resolution, duration and any `parameters.<field>` columns. */
  parameters: Record<string, unknown>;
}

/**
 * When to poll a job: first poll `firstPollMs` after submission, then every `intervalMs` growing by `backoff`
 * up to `capMs`, each jittered by ±`jitter`. Unless `adaptive` is false, this schedule only holds until the
 * worker has learned the gateway's latency; then each job is first checked when 90% of jobs are finished.
 */
export interface PollSchedule {
  firstPollMs: number;
  intervalMs: number;
  backoff: number;
  capMs: number;
  jitter: number;
  /** Default true (absent in batches started before adaptive polling). */
  adaptive?: boolean;
}

export const DEFAULT_POLL_SCHEDULE: PollSchedule = {
  firstPollMs: 30_000,
  intervalMs: 15_000,
  backoff: 1.5,
  capMs: 120_000,
  jitter: 0.2,
};

export interface BatchOptions {
  /** Most prompts in flight (submitted, not finished) at once. */
  concurrency: number;
  poll: PollSchedule;
  /** A job still unfinished this long after submission fails with `deadline_exceeded`. */
  jobDeadlineMs: number;
  /** Start-to-close timeout of one gateway call activity; bounds how long a crashed worker's call blocks a retry. */
  activityTimeoutMs: number;
  /** Rows read per page by the batch workflow. */
  pageSize: number;
  /** Prompts started per workflow run before the batch continues as new. */
  promptsPerRun: number;
  /** Where the worker writes the manifest; default `out/<batchId>`. */
  outDir?: string;
  /** Download each finished video into this folder (as the worker sees it), verified, as soon as it completes. */
  downloadDir?: string;
  /** Guard rails: the batch stops submitting and ends cleanly once any is crossed. */
  maxFailures?: number;
  /** Failed share of finished rows (0-1), checked once at least 10 rows finished. */
  maxFailureRate?: number;
  /** Most jobs to submit over the whole batch (a spend cap). */
  maxSubmissions?: number;
  /** Epoch ms after which no new job is submitted. */
  deadlineAt?: number;
}

// A wide window: with jobs taking minutes, keeping a gateway's rate limit busy takes hundreds of jobs in
// flight. The worker's request pacer, not the window, decides how fast requests go.
export const DEFAULT_BATCH_OPTIONS: BatchOptions = {
  concurrency: 500,
  poll: DEFAULT_POLL_SCHEDULE,
  jobDeadlineMs: 60 * 60_000,
  activityTimeoutMs: 30_000,
  pageSize: 100,
  promptsPerRun: 400,
};

export interface BatchInput {
  batchId: string;
  /** Path of the CSV as the workers see it, and the sha256 of its content (checked on every read). */
  csvPath: string;
  csvSha256: string;
  totalRows: number;
  options: BatchOptions;
  /** The batch whose failed rows this batch retries. */
  retryOf?: string;
  /** Carried across continue-as-new. */
  carry?: BatchCarry;
}

export interface BatchCarry {
  /** Index of the first row not yet started; rows start in file order. */
  nextRow: number;
  counts: BatchCounts;
  startedAt: number;
  concurrency: number;
  pausedReason: string | null;
  gateUntil: number;
  manifestPath: string;
  runs: number;
  stoppedReason?: string | null;
}

export interface BatchCounts {
  succeeded: number;
  failed: number;
}

export type PromptStatus = 'succeeded' | 'failed';

/** A row's own fields as its result carries them, so a failed row can be written back as an input row. */
export interface RowFields extends Omit<PromptRow, 'id'> {
  rowId: string;
}

export interface PromptResult extends RowFields {
  status: PromptStatus;
  jobId?: string;
  url?: string;
  errorCode?: string;
  errorMessage?: string;
  /** Submit attempts (1 when the first submit went through). */
  attempts: number;
  /** Status-poll attempts, including waits before the first poll. */
  polls: number;
  submittedAt?: string;
  finishedAt: string;
  /** With --download: the verified file, or why it could not be fetched. */
  file?: string;
  sha256?: string;
  bytes?: number;
  downloadError?: string;
}

export function rowFields(row: PromptRow): RowFields {
  return {
    rowId: row.id,
    line: row.line,
    prompt: row.prompt,
    model: row.model,
    input: row.input,
    parameters: row.parameters,
  };
}

export interface SubmitResult {
  jobId: string;
  /** Epoch ms when the gateway accepted the job. */
  submittedAt: number;
  attempts: number;
}

export interface PollOutcome {
  status: PromptStatus;
  url?: string;
  errorCode?: string;
  errorMessage?: string;
  polls: number;
}

export interface PromptInput {
  batchId: string;
  row: PromptRow;
  poll: PollSchedule;
  jobDeadlineMs: number;
  activityTimeoutMs: number;
  downloadDir?: string;
}

/** A verified download of a finished video. */
export interface DownloadedVideo {
  file: string;
  sha256: string;
  bytes: number;
}

export interface BatchProgress {
  batchId: string;
  total: number;
  started: number;
  inFlight: number;
  succeeded: number;
  failed: number;
  /** Prompts waiting for the gateway's Retry-After. */
  rateLimited: number;
  /** Epoch ms until which new submissions are held back after a 429, if in the future. */
  rateLimitedUntil: number | null;
  /** Why the batch is paused (auth failure or operator), or null. */
  pausedReason: string | null;
  /** Prompts blocked on the pause (a call failed with 401/403). */
  blocked: number;
  concurrency: number;
  startedAt: number;
  done: boolean;
  /** Where finished rows are recorded ('' until the first is). */
  manifestPath: string;
  /** Set once a guard rail stopped new submissions. */
  stoppedReason: string | null;
}

export interface BatchResult {
  batchId: string;
  total: number;
  succeeded: number;
  failed: number;
  manifestPath: string;
  /** Rows never submitted because a guard rail stopped the batch. */
  notStarted: number;
  /** Which guard rail stopped the batch, if one did. */
  stoppedReason?: string;
}
