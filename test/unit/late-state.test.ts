import { describe, expect, it } from 'vitest';
import { DEFAULT_BATCH_OPTIONS } from '../../src/contract/batch-options';
import {
  arrivedLateResult,
  mayArriveLate,
  promptSpendOptions,
  replacesState,
  type PromptResult,
} from '../../src/contract/prompt';
import { pollDelayMs } from '../../src/activities/poll-schedule';
import { duration, durationText, lateVideoLines } from '../../src/cli/support';
import { finalStates } from '../../src/results/manifest';
import {
  LATE_RECORD_MS,
  lateRecordRetryMs,
  lateRetryMs,
  latePoll,
  lateStep,
  lateWatch,
} from '../../src/workflows/late-state';

const MIN = 60_000;
const ended: PromptResult = {
  rowId: 'r1',
  line: 2,
  prompt: 'a fox',
  model: 'm',
  input: {},
  parameters: {},
  status: 'failed',
  errorCode: 'deadline_exceeded',
  errorMessage: 'still running',
  jobId: 'vid_1',
  attempts: 1,
  polls: 9,
  finishedAt: '2025-01-01T00:00:00.000Z',
};
const endedAt = Date.parse(ended.finishedAt);
const late = { lateForMs: 24 * 60 * MIN, lateCheckMs: 5 * MIN };

describe('late videos: which rows keep watching their job', () => {
  it('a row that ended deadline_exceeded or cancelled with a job id, while the batch keeps late videos', () => {
    expect(lateWatch(late, ended)).toEqual({
      jobId: 'vid_1',
      endedAs: 'deadline_exceeded',
      endedAt: ended.finishedAt,
      fromMs: endedAt,
      untilMs: endedAt + 24 * 60 * MIN,
      checkMs: 5 * MIN,
    });
    expect(lateWatch(late, { ...ended, errorCode: 'cancelled' })?.endedAs).toBe('cancelled');
  });

  it('no other row, and none at all with --late-for 0 or in a batch started before late videos', () => {
    expect(lateWatch(late, { ...ended, status: 'succeeded', errorCode: undefined })).toBeUndefined();
    expect(lateWatch(late, { ...ended, errorCode: 'job_failed' })).toBeUndefined();
    expect(lateWatch(late, { ...ended, errorCode: 'job_gone' })).toBeUndefined();
    expect(lateWatch(late, { ...ended, jobId: undefined })).toBeUndefined();
    expect(lateWatch({ lateForMs: 0, lateCheckMs: 5 * MIN }, ended)).toBeUndefined();
    expect(lateWatch({}, ended)).toBeUndefined();
    // A batch's options reach its prompts, and 0 is "off" there too.
    expect(promptSpendOptions(DEFAULT_BATCH_OPTIONS)).toMatchObject(late);
    expect(promptSpendOptions({ ...DEFAULT_BATCH_OPTIONS, lateForMs: 0 }).lateForMs).toBeUndefined();
    expect(mayArriveLate(ended)).toBe(true);
    expect(mayArriveLate({ ...ended, errorCode: 'url_expired' })).toBe(false);
  });

  it('a first check later than the window is the window', () => {
    expect(lateWatch({ lateForMs: 2 * MIN, lateCheckMs: 5 * MIN }, ended)?.checkMs).toBe(2 * MIN);
  });
});

describe('late videos: a slow schedule counted from the row end', () => {
  it('every 5 minutes, growing by half up to 30 minutes, jittered; fixed (not the learned latency)', () => {
    const poll = latePoll(lateWatch(late, ended)!);
    expect(poll).toMatchObject({ firstPollMs: 5 * MIN, adaptive: false, jitter: 0.2 });
    // Attempt 1 waits for the first check (firstPollMs); attempts 2... are checks, each setting the next delay.
    const delays = [2, 3, 4, 5, 6, 7, 8].map((attempt) => pollDelayMs(poll, attempt, () => 0.5) / MIN);
    expect(delays).toEqual([5, 7.5, 11.25, 16.875, 25.3125, 30, 30]);
  });

  it('a completed job with a URL is kept; anything else ends the watch, the row staying as it ended', () => {
    expect(lateStep({ status: 'succeeded', url: 'https://x/v.mp4', polls: 4 })).toBe('keep');
    expect(lateStep({ status: 'failed', errorCode: 'deadline_exceeded', polls: 50 })).toBe('over');
    expect(lateStep({ status: 'failed', errorCode: 'job_failed', polls: 3 })).toBe('over');
    expect(lateStep({ status: 'failed', errorCode: 'no_video_url', polls: 3 })).toBe('over');
  });

  it('after a refused key, tries again while the window lasts; the recording, for an hour at least', () => {
    const watch = lateWatch({ lateForMs: 60 * MIN, lateCheckMs: 5 * MIN }, ended)!;
    expect(lateRetryMs(watch, endedAt + MIN)).toBe(5 * MIN);
    expect(lateRetryMs(watch, endedAt + 58 * MIN)).toBe(2 * MIN + 100);
    expect(lateRetryMs(watch, endedAt + 60 * MIN)).toBeUndefined();
    const keptAt = endedAt + 50 * MIN;
    expect(lateRecordRetryMs(watch, keptAt, endedAt + 70 * MIN)).toBe(5 * MIN);
    expect(lateRecordRetryMs(watch, keptAt, keptAt + LATE_RECORD_MS)).toBeUndefined();
  });
});

describe("late videos: the row's new state", () => {
  const kept: PromptResult = {
    ...ended,
    status: 'succeeded',
    errorCode: undefined,
    errorMessage: undefined,
    url: 'https://x/v.mp4',
    file: '/out/r1.mp4',
    finishedAt: '2025-01-01T00:20:00.000Z',
  };

  it('is marked with how and when the row had ended, and keeps whose payment a followed job was', () => {
    const reusedFrom = { batchId: 'batch-a', rowId: 'x1' };
    expect(arrivedLateResult(kept, { ...ended, reusedFrom })).toMatchObject({
      status: 'succeeded',
      arrivedLate: { endedAs: 'deadline_exceeded', endedAt: ended.finishedAt },
      reusedFrom,
    });
  });

  it('outlives the ended line it superseded, wherever that line lands; a later run of the row replaces it', () => {
    const late = arrivedLateResult(kept, ended);
    expect(finalStates([ended, late])).toEqual([late]);
    // The batch's group with the ended line written after the late line (a store orders groups by time).
    expect(finalStates([late, ended])).toEqual([late]);
    expect(replacesState(late, ended)).toBe(false);
    // A re-run that ends the row again is a new state.
    const again = { ...ended, finishedAt: '2025-01-02T00:00:00.000Z' };
    expect(finalStates([ended, late, again])).toEqual([again]);
    expect(replacesState(undefined, ended)).toBe(true);
  });
});

describe('late videos on the command line', () => {
  it('--late-for takes seconds or a number with a unit; 0 turns late checks off', () => {
    expect(duration('90')).toBe(90_000);
    expect(duration('90m')).toBe(90 * MIN);
    expect(duration('24h')).toBe(24 * 60 * MIN);
    expect(duration('2d')).toBe(48 * 60 * MIN);
    expect(duration('1.5H')).toBe(90 * MIN);
    expect(duration('0')).toBe(0);
    for (const bad of ['', '-1', '1y', 'h', '24 hours']) expect(() => duration(bad), bad).toThrow(/duration/);
    expect([durationText(24 * 60 * MIN), durationText(90 * MIN), durationText(1500)]).toEqual([
      '24 h',
      '90 min',
      '1.5 s',
    ]);
  });

  it("run's summary says how many late jobs are due and how they will be fetched", () => {
    const batchId = 'batch-1';
    const lateForMs = 24 * 60 * MIN;
    const [here] = lateVideoLines({ lateJobs: 3 }, { batchId, lateForMs, checkedBy: 'here' });
    expect(here).toBe(
      '3 jobs passed their deadline or were cancelled and may still finish (and be billed): vidbatch checks ' +
        'them for 24 h after their rows ended while a worker runs here (the next `vidbatch run` in this ' +
        'folder, or `vidbatch worker`), keeping any video that arrives; meanwhile `vidbatch download batch-1` ' +
        'fetches what arrived',
    );
    expect(lateVideoLines({ lateJobs: 1 }, { batchId, lateForMs, checkedBy: 'workers' })[0]).toMatch(
      /^1 job passed its deadline or was cancelled .*: the workers check them for 24 h/,
    );
    expect(lateVideoLines({ lateJobs: 2 }, { batchId, lateForMs: 0, checkedBy: 'none' })[0]).toMatch(
      /not checked any more \(--late-for 0\); `vidbatch download batch-1` fetches what arrived$/,
    );
    expect(lateVideoLines({ arrivedLate: 2 }, { batchId, lateForMs, checkedBy: 'here' })).toEqual([
      '2 videos arrived late, after their rows ended (deadline_exceeded or cancelled): kept as succeeded (arrivedLate in the manifest)',
    ]);
    expect(lateVideoLines({}, { batchId, lateForMs, checkedBy: 'here' })).toEqual([]);
  });
});
