// The prompt workflow's input and result (a row of the manifest). Imported by workflow code: no Node
// built-ins.
import type { NoticeTo } from './notice';
import type { EnhanceOptions } from './enhance';
import type { BatchOptions, PollSchedule, UnknownSubmitPolicy, VerifyMode } from './batch-options';
import type { Verification } from './jobs';
import type { PromptRow, RowFields } from './rows';

/** The spend-safety, rate-budget and download fields of a batch's options, as its prompts get them. */
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
  | 'download'
  | 'maxVideoBytes'
  | 'lateForMs'
  | 'lateCheckMs'
  | 'stopJobs'
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
    download: options.download,
    ...(options.maxVideoBytes !== undefined ? { maxVideoBytes: options.maxVideoBytes } : {}),
    // Absent from the options of a batch started before late videos: its prompts keep no late watch.
    ...(options.lateForMs ? { lateForMs: options.lateForMs } : {}),
    ...(options.lateCheckMs ? { lateCheckMs: options.lateCheckMs } : {}),
    ...(options.stopJobs ? { stopJobs: true } : {}),
  };
}

export type PromptStatus = 'succeeded' | 'failed';

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
  /** The verified file (unless --no-download), or why it could not be fetched. */
  file?: string;
  sha256?: string;
  bytes?: number;
  downloadError?: string;
  /** When `vidbatch download` fetched `file` (a line it appended; absent: the run's own download). */
  downloadedAt?: string;
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
  /**
   * The same request was paid for by another batch in the output root: its row, whose job (and video) this row
   * reports at no new cost.
   */
  reusedFrom?: ReusedFrom;
  /**
   * The row had ended without its video (`endedAs`: deadline_exceeded or cancelled) while its job went on;
   * the video arrived later and was kept: this line is the row's new state.
   */
  arrivedLate?: { endedAs: string; endedAt: string };
  /**
   * What became of the job of a row that ended while it went on (cancelled, or past its deadline with no late
   * videos kept), where the provider can stop a job (stop-job.ts): `stopped` at the provider (it bills no
   * more), `ended` there already (failed or gone), or `not_stopped` (the stop failed: it may still bill).
   */
  jobStop?: JobStop;
  /** Chat calls this row's run made for its rewrite (a kept rewrite read from the output root: none). */
  chatCalls?: number;
  /** Tokens those chat calls used, as their answers' `usage` said. */
  chatTokens?: number;
}

/**
 * What became of a job its row gave up on: stopped at the provider, found ended there, not stopped (no cancel
 * reached it, or another batch's row follows it), or only `requested` (the provider was asked and may still
 * finish and bill it: watched for a late video like one not stopped).
 */
export type JobStop = 'stopped' | 'ended' | 'not_stopped' | 'requested';

/** Another batch's row whose job a row reuses or followed. */
export interface ReusedFrom {
  batchId: string;
  rowId: string;
}

/**
 * Codes of a row that ended while its job went on at the gateway: vidbatch stopped waiting for it (its
 * deadline passed, or the batch was cancelled). Such a job may still finish, be billed, and bring its video
 * late (docs/spend-safety.md#late-videos).
 */
export const LATE_CODES: ReadonlySet<string> = new Set(['deadline_exceeded', 'cancelled']);

/**
 * Whether a row's (final) result ended it while its job went on, its job id known and the job not stopped at
 * the provider: its video may arrive late.
 */
export function mayArriveLate(r: Pick<PromptResult, 'status' | 'errorCode' | 'jobId' | 'jobStop'>): boolean {
  return (
    r.status === 'failed' &&
    !!r.jobId &&
    LATE_CODES.has(r.errorCode ?? '') &&
    (r.jobStop === undefined || r.jobStop === 'not_stopped' || r.jobStop === 'requested')
  );
}

/**
 * The row's state once a late video is kept: the result that kept it (succeeded, or what its download made of
 * it), marked with how and when the row had ended (`ended`, a result mayArriveLate says yes to).
 */
export function arrivedLateResult(kept: PromptResult, ended: PromptResult): PromptResult {
  return {
    ...kept,
    ...(ended.reusedFrom && !kept.reusedFrom ? { reusedFrom: ended.reusedFrom } : {}),
    arrivedLate: { endedAs: ended.errorCode ?? 'failed', endedAt: ended.finishedAt },
  };
}

/**
 * Whether `next`, a row's line read after `kept`, is its new state (last line wins), except for the line a
 * late video superseded: the row's ended line written after the late one (by the batch's group of results,
 * which a late check may overtake, or in a store whose objects are ordered by time) stays superseded.
 */
export function replacesState(
  kept: Pick<PromptResult, 'arrivedLate'> | undefined,
  next: Pick<PromptResult, 'status' | 'errorCode' | 'finishedAt' | 'arrivedLate'>,
): boolean {
  const late = kept?.arrivedLate;
  if (!late || next.arrivedLate) return true;
  return !(next.status === 'failed' && next.errorCode === late.endedAs && next.finishedAt === late.endedAt);
}

/**
 * Code of a row whose video URL answered 403, 404 or 410 and whose job, checked once more, gave no URL that
 * worked: paid, its job id kept; `vidbatch download` asks the job again, a re-run checks it (no new job).
 */
export const URL_EXPIRED_CODE = 'url_expired';

/** Code of a row whose job answered `completed` with no usable `data[].url`; the job id is kept. */
export const NO_VIDEO_URL_CODE = 'no_video_url';

/**
 * Code of a row whose job the gateway no longer knows: a status check answered 404, or a status that says so
 * (`UNKNOWN`, which one provider answers for tasks past their 24 h). The job id is kept; the job may have
 * finished and been billed, so this is never by itself a reason to pay again (`retry-failed --code job_gone`).
 */
export const JOB_GONE_CODE = 'job_gone';

/** The message of a `job_gone` row: a 404 (`rawStatus` absent), or the status that said the job is gone. */
export function jobGoneMessage(jobId: string | undefined, rawStatus?: string): string {
  return (
    `the gateway no longer knows job ${jobId} (${rawStatus === undefined ? '404' : `status "${rawStatus}"`}); ` +
    'its id is kept: it may have finished and been billed, so nothing is paid again for it unless ' +
    `\`retry-failed --code ${JOB_GONE_CODE}\` asks`
  );
}

/**
 * Codes by which gateways refuse a prompt for its content, on submit or as the job's failure: moderation,
 * content policy or filter, data inspection, safety. Sent again unchanged it would be refused again (and may
 * be billed again), so a re-run never re-sends such a row; `retry-failed --code <code>` does, deliberately.
 */
const CONTENT_REFUSAL =
  /moderat|content_?polic|content_?filter|data_?inspection|inspection_?fail|safety|nsfw|policy_?violation|sensitive_?content|inappropriate/;

/** Whether an error code is the gateway refusing the row's content (see CONTENT_REFUSAL). */
export function isContentRefusal(code: string | undefined): boolean {
  if (!code) return false;
  // `DataInspectionFailed`, `content-policy-violation` and `content_policy_violation` alike.
  const words = code
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .replace(/[\s-]+/g, '_');
  return CONTENT_REFUSAL.test(words);
}

export interface PromptInput {
  batchId: string;
  row: PromptRow;
  poll: PollSchedule;
  jobDeadlineMs: number;
  activityTimeoutMs: number;
  downloadDir?: string;
  /** Download the finished video (into `downloadDir`, else the batch's output folder); false: record its URL only. */
  download: boolean;
  /** The largest video downloaded, in bytes (absent: the worker's default, DEFAULT_MAX_VIDEO_BYTES). */
  maxVideoBytes?: number;
  /** A job an earlier run of this row created: checked at the gateway before paying for another. */
  knownJobId?: string;
  /**
   * An earlier run stopped `knownJobId` at the provider: unless its check finds it finished, a new job is paid
   * for (a stopped job the provider no longer knows is no `job_gone`: it made no video).
   */
  knownJobStopped?: true;
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
  /** Rewrite the row's prompt first (absent: send it as it is; a row with `originalPrompt` is never rewritten). */
  enhance?: EnhanceOptions;
  /** `knownJobId` is another batch's job for this request: a result from it says whose payment it was. */
  followedFrom?: ReusedFrom;
  /**
   * Claim the row's request before paying for it, and follow the job another row claimed and paid for
   * (activities/request-claims.ts): the batch's `reuse`.
   */
  claimRequest?: boolean;
  /**
   * After the row ended `deadline_exceeded` or `cancelled` with a job id, its job is still checked for this long
   * and a video that arrives is kept (workflows/late-video.ts). Absent or 0: no late checks.
   */
  lateForMs?: number;
  /** The first late check this long after the row ended, then growing (late-state.ts). */
  lateCheckMs?: number;
  /**
   * The provider can stop a job: a row cancelled with its job id has that job stopped there, and so does a row
   * past its deadline when no late videos are kept (`lateForMs` 0); workflows/stop-job.ts.
   */
  stopJobs?: boolean;
  /** Where the batch's notices go (`run --notify`), and its CSV: a late video is told there too. */
  notice?: { to: NoticeTo[]; csvPath: string };
}

/** Code of a row whose downloaded video does not match its request (`--verify strict`); job and file are kept. */
export const VIDEO_MISMATCH_CODE = 'video_mismatch';

/** Code of a row whose prompt workflow ended without a result (it failed, or someone terminated it). */
export const WORKFLOW_FAILED_CODE = 'workflow_failed';

/** The result of a row whose prompt workflow ended without one of its own. */
export function workflowFailedResult(row: RowFields, message: string, finishedAt: string): PromptResult {
  return {
    ...row,
    status: 'failed',
    errorCode: WORKFLOW_FAILED_CODE,
    errorMessage: message,
    attempts: 0,
    polls: 0,
    finishedAt,
  };
}

/** A row's prompt workflow id: `<batch-id>/<row-id>`. */
export function promptWorkflowId(batchId: string, rowId: string): string {
  return `${batchId}/${rowId}`;
}
