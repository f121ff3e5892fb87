// What the gateway activities return to the workflows: a submitted job, a check of a known job, a poll's
// outcome, a downloaded and verified video. Imported by workflow code: no Node built-ins.
import type { PromptStatus, ReusedFrom } from './prompt';

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
  /** The age from which spare checks may find it finished (half the jobs are by then); absent: not learned. */
  spareCheckAgeMs?: number;
  /** The job id could not be written to the jobs journal (why): a terminate before the row ends may lose it. */
  journalError?: string;
  /** The gateway's request id (`x-request-id`) of the answer that made the job, when it gave one. */
  requestId?: string;
  /**
   * Not paid here: another row claimed the same request and paid for this job (activities/request-claims.ts);
   * the row follows it, and its result says whose payment it was.
   */
  followedFrom?: ReusedFrom;
}

/** One status check of a job known from an earlier run (checkJob). */
export type JobCheck =
  | { state: 'succeeded'; url: string }
  | { state: 'failed'; errorCode: string; errorMessage: string }
  | { state: 'unfinished'; rawStatus: string }
  /** `completed` with no usable video URL: the row ends `no_video_url` (no new job is paid for). */
  | { state: 'no_url'; errorMessage: string }
  /** The gateway no longer knows the job: 404, or the status that says so (`rawStatus`, e.g. `UNKNOWN`). */
  | { state: 'gone'; rawStatus?: string };

/**
 * A stop of a job the row no longer waits for (stopJob): `stopped` by the provider's cancel, `stop_requested`
 * where the cancel only asks (the job may still finish and bill), or what a check found instead (it had
 * finished or failed meanwhile); `unfinished`: the provider has no cancel call.
 */
export type StopResult = { state: 'stopped' } | { state: 'stop_requested' } | JobCheck;

/** When a job's first check is due by what a worker knows now (activities firstCheckTiming). */
export interface FirstCheckTiming {
  /**
   * Nothing is known yet, and enough exploring jobs will be checked soon to learn it: wait and ask again.
   * False with nothing known: check now.
   */
  waitForEstimate: boolean;
  /** Absent while the worker knows no latency. */
  dueInMs?: number;
  /** The due age is a guess: no age reaches 90% of the jobs finished yet. */
  guess?: boolean;
  spareInMs?: number;
}

export interface PollOutcome {
  status: PromptStatus;
  url?: string;
  errorCode?: string;
  errorMessage?: string;
  polls: number;
  /** The gateway's request id (`x-request-id`) of the status check that found the job terminal, if given. */
  requestId?: string;
  /** The video, fetched by the check that found the job succeeded (PollInput.download); absent: not fetched. */
  download?: InlineDownload;
}

/**
 * A download made by the status check that found the job succeeded: the video, or a failure no retry can
 * change (the URL answered 403, 404 or 410, or the file is too large). Any other failure leaves it absent
 * and the download activity fetches the video, with its own retries.
 */
export type InlineDownload =
  { ok: true; video: VerifiedVideo } | { ok: false; type: string; message: string };

/** Where a video goes and what it is checked against: the download's input, beside its URL. */
export interface VideoTarget {
  /** The folder (under a download root); absent: the batch's output folder, beside its manifest. */
  dir?: string;
  /** The batch, whose output folder (`outDir`, else `<outRoot>/<batchId>`) takes the video without `dir`. */
  batchId?: string;
  outDir?: string;
  name: string;
  /** The row's `parameters` (absent: the container alone is checked). */
  parameters?: Record<string, unknown>;
  /** The largest file accepted (absent: DEFAULT_MAX_VIDEO_BYTES). */
  maxBytes?: number;
}

/** A downloaded video with its check against the row's request. */
export type VerifiedVideo = DownloadedVideo & { verification: Verification };

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
