// Late videos, as pure decisions (no Temporal calls, time passed in): whether a row that just ended keeps
// watching its job, the slow schedule of those checks, what a check means, and the row's new state when the
// video arrives. late-video.ts makes the calls. A row's end is never delayed for it: the batch hears of the
// row when it ends, and a video that arrives later is recorded as the row's new state (`arrivedLate`).
import { LATE_CHECK_CAP, type PollSchedule } from '../contract/batch-options';
import type { PollOutcome } from '../contract/jobs';
import { mayArriveLate, type PromptInput, type PromptResult } from '../contract/prompt';

/** Each late check waits this much longer than the one before (up to LATE_CHECK_CAP times the first). */
export const LATE_CHECK_BACKOFF = 1.5;

/** A row's job watched after the row ended. */
export interface LateWatch {
  jobId: string;
  /** How the row ended (`deadline_exceeded`, `cancelled`) and when (its result's finishedAt). */
  endedAs: string;
  endedAt: string;
  /** Epoch ms of the row's end: the late checks' schedule counts from it. */
  fromMs: number;
  /** Epoch ms after which a check that finds the job unfinished ends the watch (nothing more is recorded). */
  untilMs: number;
  /** The first late check's delay after the row ended. */
  checkMs: number;
}

/**
 * The watch of a row that ended `deadline_exceeded` or `cancelled` with its job id, when the batch keeps late
 * videos (`lateForMs` > 0); undefined otherwise (succeeded, failed at the gateway, no job, a batch started
 * before late videos).
 */
export function lateWatch(
  input: Pick<PromptInput, 'lateForMs' | 'lateCheckMs'>,
  ended: PromptResult,
): LateWatch | undefined {
  const forMs = input.lateForMs ?? 0;
  if (forMs <= 0 || !mayArriveLate(ended)) return undefined;
  const fromMs = Date.parse(ended.finishedAt);
  if (!Number.isFinite(fromMs)) return undefined;
  // A first check later than the window itself would never be made: the window's end is checked instead.
  const checkMs = Math.max(100, Math.min(input.lateCheckMs ?? forMs, forMs));
  return {
    jobId: ended.jobId!,
    endedAs: ended.errorCode!,
    endedAt: ended.finishedAt,
    fromMs,
    untilMs: fromMs + forMs,
    checkMs,
  };
}

/**
 * The late checks' poll schedule (the poll activity's attempts, timed by the worker, counted from the row's
 * end): the first `checkMs` after it, then each half as long again, up to LATE_CHECK_CAP × `checkMs`,
 * jittered by 20% so the late checks of rows that ended together spread out. Fixed: the learned job latency
 * is about jobs that finish in time, not these.
 */
export function latePoll(watch: LateWatch): PollSchedule {
  return {
    firstPollMs: watch.checkMs,
    intervalMs: watch.checkMs,
    backoff: LATE_CHECK_BACKOFF,
    capMs: LATE_CHECK_CAP * watch.checkMs,
    jitter: 0.2,
    adaptive: false,
  };
}

/**
 * What a late check's outcome means: `keep` the video of a job that completed (it is fetched and recorded);
 * `over` for a job that failed, is gone, answered without a URL, or was still unfinished at a check after the
 * window: the row stays as it ended.
 */
export function lateStep(outcome: PollOutcome): 'keep' | 'over' {
  return outcome.status === 'succeeded' && !!outcome.url ? 'keep' : 'over';
}

/**
 * After a late check that could not be made (a refused key: the worker refuses it locally until the key
 * changes), the wait before trying again; undefined once the window is over.
 */
export function lateRetryMs(watch: LateWatch, now: number): number | undefined {
  if (now >= watch.untilMs) return undefined;
  return Math.min(watch.checkMs, watch.untilMs - now + 100);
}

/** How long after a late video was kept its recording is tried again, at least (a manifest that cannot be written). */
export const LATE_RECORD_MS = 60 * 60_000;

/**
 * After the late video's manifest line could not be written (the activity's retries ran out), the wait before
 * trying again: until the window's end, or LATE_RECORD_MS after the video was kept when that is later;
 * undefined after that (the video stays on disk, and `vidbatch download` records it).
 */
export function lateRecordRetryMs(watch: LateWatch, keptAt: number, now: number): number | undefined {
  const until = Math.max(watch.untilMs, keptAt + LATE_RECORD_MS);
  if (now >= until) return undefined;
  return Math.min(watch.checkMs, until - now);
}
