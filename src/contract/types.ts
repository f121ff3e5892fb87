// The data that crosses Temporal: workflow inputs and results, activity inputs and outputs, progress, and
// their defaults. Imported by workflow code, so it must stay free of Node built-ins and I/O.

/**
 * Versioned by major version: a batch of another version (0.x ran on `vidbatch`) is never picked up by this
 * version's workers, and `run`/`status` tell it apart by its task queue (client/batches.ts checkSameVersion).
 */
export const DEFAULT_TASK_QUEUE = 'vidbatch-1';

export const DEFAULT_MODEL = 'modelfamily-1.0-r2v';

/** Temporal payloads stay far below its 2 MB limit: a page of rows and a group of results at most this big. */
export const MAX_PAGE_BYTES = 512 * 1024;
export const MAX_RESULT_GROUP_BYTES = 512 * 1024;

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
  /** false: keep to this schedule even once the worker has learned the gateway's latency. */
  adaptive: boolean;
}

export const DEFAULT_POLL_SCHEDULE: PollSchedule = {
  firstPollMs: 30_000,
  intervalMs: 15_000,
  backoff: 1.5,
  capMs: 120_000,
  jitter: 0.2,
  adaptive: true,
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
  /** After a submit whose outcome is unknown: `resend` with the same Idempotency-Key, at most `maxUnknownResends` times; `fail`: the row fails with `submit_unknown`. */
  onUnknownSubmit: UnknownSubmitPolicy;
  /** Resends after unknown submit outcomes, per row. */
  maxUnknownResends: number;
  /** Start-to-close of one submit attempt; the worker keeps its HTTP timeout inside it. */
  submitTimeoutMs: number;
  /** Rate budget (docs/rate-budget.md): priority of this batch's gateway calls, 1 (first) to 5. */
  priority: number;
  /** Rate budget: this batch's weight in the fair share between batches of the same priority. */
  weight: number;
  /** Pause submitting after this many submits in a row had an unknown outcome (0: never). */
  pauseAfterUnknown: number;
  /** Pause the batch when submits could not be sent for this long (connection refused, DNS, ...). */
  unreachablePauseMs: number;
  /** What a downloaded video that differs from its request does to the row. */
  verify: VerifyMode;
}

/** What a prompt does after a submit whose outcome is unknown (it may have created a billed job). */
export type UnknownSubmitPolicy = 'resend' | 'fail';

/** While paused as unreachable, each waiting prompt tries its submit again this often (at most a minute). */
export function unreachableRetryMs(unreachablePauseMs: number): number {
  return Math.min(60_000, unreachablePauseMs);
}

/** The spend-safety and rate-budget fields of a batch's options, as its prompts get them. */
export function promptSpendOptions(
  options: BatchOptions,
): Pick<
  PromptInput,
  | 'onUnknownSubmit'
  | 'maxUnknownResends'
  | 'submitTimeoutMs'
  | 'outDir'
  | 'priority'
  | 'weight'
  | 'unreachablePauseMs'
  | 'verify'
> {
  return {
    onUnknownSubmit: options.onUnknownSubmit,
    maxUnknownResends: options.maxUnknownResends,
    submitTimeoutMs: options.submitTimeoutMs,
    ...(options.outDir ? { outDir: options.outDir } : {}),
    priority: options.priority,
    weight: options.weight,
    unreachablePauseMs: options.unreachablePauseMs,
    verify: options.verify,
  };
}

/**
 * The one table of batch defaults, applied by the client when it starts a batch (a flag given, else the
 * batch's stored options, else this); workflows get complete options and apply none. A wide window: with jobs
 * taking minutes, keeping a gateway's rate limit busy takes hundreds of jobs in flight; the gateway queue's
 * rate limit (the learner's, docs/rate-budget.md), not the window, decides how fast requests go.
 */
export const DEFAULT_BATCH_OPTIONS: BatchOptions = {
  concurrency: 500,
  poll: DEFAULT_POLL_SCHEDULE,
  jobDeadlineMs: 60 * 60_000,
  activityTimeoutMs: 30_000,
  pageSize: 100,
  promptsPerRun: 400,
  onUnknownSubmit: 'resend',
  maxUnknownResends: 1,
  submitTimeoutMs: 180_000,
  priority: 3,
  weight: 1,
  pauseAfterUnknown: 5,
  unreachablePauseMs: 120_000,
  verify: 'flag',
};

// Single values of the table, for help texts.
export const DEFAULT_ON_UNKNOWN_SUBMIT = DEFAULT_BATCH_OPTIONS.onUnknownSubmit;
export const DEFAULT_MAX_UNKNOWN_RESENDS = DEFAULT_BATCH_OPTIONS.maxUnknownResends;
export const DEFAULT_SUBMIT_TIMEOUT_MS = DEFAULT_BATCH_OPTIONS.submitTimeoutMs;
export const DEFAULT_PAUSE_AFTER_UNKNOWN = DEFAULT_BATCH_OPTIONS.pauseAfterUnknown;
export const DEFAULT_UNREACHABLE_PAUSE_MS = DEFAULT_BATCH_OPTIONS.unreachablePauseMs;

export interface BatchInput {
  batchId: string;
  /** Path of the CSV as the workers see it, and the sha256 of its content (checked on every read). */
  csvPath: string;
  csvSha256: string;
  totalRows: number;
  options: BatchOptions;
  /** The batch whose failed rows this batch retries. */
  retryOf?: string;
  /** retry-failed: the original batch's output folder, consulted for known jobs of the same row ids. */
  priorOutDir?: string;
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
  stoppedReason: string | null;
  /** Rows counted as succeeded because an earlier run of the batch finished them (not submitted again). */
  skipped: number;
  /** Rows that had a submit with an unknown outcome (each may have been billed more than once). */
  unknownSubmitRows: number;
  /** What paused the batch; null when it is not paused. */
  pauseKind: PauseKind | null;
  /** Submits in a row with an unknown outcome (the breaker's count). */
  unknownInARow: number;
  /** POSTs over the batch's whole life, as far as it knows (earlier runs' journal lines, reports). */
  posts: number;
}

/**
 * Why a batch is paused: `unreachable` lifts itself when a submit goes through again; the others wait for
 * `resume` (`breaker`: unknown submit outcomes in a row; `recording`: the manifest could not be written).
 */
export type PauseKind = 'operator' | 'key' | 'input' | 'unreachable' | 'breaker' | 'recording';

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
  /** The downloaded file checked against the row's duration and resolution (absent: not downloaded). */
  verification?: Verification;
  /** Submits of this row whose outcome was unknown: each may have created a billed job (absent: none). */
  unknownSubmits?: number;
  /** Generation of the Idempotency-Key of the job this result reports (see PromptInput.keyGeneration). */
  generation?: number;
  /** The job id could not be written to the jobs journal when it came (why). */
  journalError?: string;
  /** The gateway's request id (`x-request-id`) of the last answer about this row, for the provider's support. */
  requestId?: string;
}

/** What earlier runs know about a row: its final state in the manifest and its jobs in the jobs journal. */
export interface PriorOutcome {
  /** Final state in the manifest, if the row was recorded. */
  status?: PromptStatus;
  /** The error code of that final state, when it failed. */
  errorCode?: string;
  /** The row's latest known job: checked at the gateway before paying again. */
  jobId?: string;
  /** The key generation of that job (absent: `generation`). */
  jobGeneration?: number;
  url?: string;
  /** Highest key generation used for the row so far (0 when none is known). */
  generation: number;
  /** Submits with an unknown outcome so far. */
  unknownSubmits?: number;
  /** POSTs this batch's earlier runs made for the row (the jobs journal's lines): --max-submissions counts them. */
  posts?: number;
  /** Not filled by readRows (the payload would double); kept for callers that have it. */
  result?: PromptResult;
}

/** A row as readRows returns it: the row, and what earlier runs know about it (absent: nothing). */
export type PageRow = PromptRow & { prior?: PriorOutcome };

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
  /**
   * The job age at which the worker would check it first, once it has learned the gateway's latency
   * (activities/latency.ts); absent until then (the poll schedule's firstPollMs applies).
   */
  firstCheckAgeMs?: number;
  /** The age from which spare checks may find it finished (a quarter of jobs are by then); absent: not learned. */
  spareCheckAgeMs?: number;
  /** The job id could not be written to the jobs journal (why): a terminate before the row ends may lose it. */
  journalError?: string;
  /** The gateway's request id (`x-request-id`) of the answer that made the job, when it gave one. */
  requestId?: string;
}

/** One status check of a job known from an earlier run (checkJob). */
export type JobCheck =
  | { state: 'succeeded'; url: string }
  | { state: 'failed'; errorCode: string; errorMessage: string }
  | { state: 'unfinished'; rawStatus: string }
  /** `completed` with no usable video URL: the row ends `no_video_url` (no new job is paid for). */
  | { state: 'no_url'; errorMessage: string }
  /** The gateway no longer knows the job (404). */
  | { state: 'gone' };

/** Code of a row whose job answered `completed` with no usable `data[].url`; the job id is kept. */
export const NO_VIDEO_URL_CODE = 'no_video_url';

export interface PollOutcome {
  status: PromptStatus;
  url?: string;
  errorCode?: string;
  errorMessage?: string;
  polls: number;
  /** The gateway's request id (`x-request-id`) of the status check that found the job terminal, if given. */
  requestId?: string;
}

export interface PromptInput {
  batchId: string;
  row: PromptRow;
  poll: PollSchedule;
  jobDeadlineMs: number;
  activityTimeoutMs: number;
  downloadDir?: string;
  /** A job an earlier run of this row created: checked at the gateway before paying for another. */
  knownJobId?: string;
  /**
   * Generation of the Idempotency-Key for a new submit: 0 `vidbatch:<batch>:<row>`, n > 0
   * `vidbatch:<batch>:<row>:g<n>`. The batch passes the prior generation + 1 with `knownJobId`, so a job that
   * failed or is gone is never answered again by the same key.
   */
  keyGeneration: number;
  onUnknownSubmit: UnknownSubmitPolicy;
  maxUnknownResends: number;
  submitTimeoutMs: number;
  /** The batch's output folder (the jobs journal goes there); default `<outRoot>/<batchId>`. */
  outDir?: string;
  /** Rate budget: priority and fairness weight of this prompt's gateway calls. */
  priority: number;
  weight: number;
  /** How long submits may fail to be sent before the batch is told the gateway is unreachable. */
  unreachablePauseMs: number;
  /** Unknown submit outcomes earlier runs had for this row (they count against the resend bound). */
  priorUnknownSubmits: number;
  /** retry-failed: the original batch's id, so a re-sent row carries the original Idempotency-Key. */
  keyBatchId?: string;
  /** `strict` ends a row whose downloaded video differs from its request as `video_mismatch`. */
  verify: VerifyMode;
}

/** A verified download of a finished video. */
export interface DownloadedVideo {
  file: string;
  sha256: string;
  bytes: number;
}

/**
 * A downloaded video parsed and checked against what its row asked (src/results/verify-video.ts). `problems`
 * are human-readable ("duration 3.0 s, asked 5 s (tolerance 0.5 s)", "height 480, asked 720P",
 * "not a valid MP4: ..."); `ok` when there are none.
 */
export interface Verification {
  ok: boolean;
  durationSeconds?: number;
  width?: number;
  height?: number;
  codec?: string;
  audio?: boolean;
  problems: string[];
}

/** `--verify`: `flag` (default) records a mismatch on the row; `strict` also ends the row as `video_mismatch`. */
export type VerifyMode = 'flag' | 'strict';

/** Code of a row whose downloaded video does not match its request (`--verify strict`); job and file are kept. */
export const VIDEO_MISMATCH_CODE = 'video_mismatch';

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
  /** What kind of pause. */
  pauseKind: PauseKind | null;
  /** Prompts blocked on the pause (a call failed with 401/403). */
  blocked: number;
  concurrency: number;
  startedAt: number;
  done: boolean;
  /** Where finished rows are recorded ('' until the first is). */
  manifestPath: string;
  /** Set once a guard rail stopped new submissions. */
  stoppedReason: string | null;
  /** Rows an earlier run already finished successfully: counted as succeeded, not submitted again. */
  skipped: number;
  /** Rows that had a submit with an unknown outcome: each may have been billed more than once. */
  unknownSubmitRows: number;
  /** Epoch ms until which the gateway asked the batch to wait (Retry-After), when in the future. */
  holdUntil: number | null;
  /** Why the batch holds, e.g. "the gateway asked to wait until 03:10 UTC". */
  holdReason: string | null;
  /** "capacity gate: 10 jobs running (the gateway's cap), 3 rows waiting for a slot", or null. */
  capacityGate: string | null;
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
  /** Rows finished by an earlier run of the batch, counted in `succeeded`, not submitted again. */
  skipped: number;
  /** Rows that had a submit with an unknown outcome (may have been billed more than once). */
  unknownSubmitRows: number;
}
