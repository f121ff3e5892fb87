import { describe, expect, it } from 'vitest';
import { adaptiveDelayMs, nextCheck, pollDelayMs } from '../../src/activities/poll-schedule';
import { DEFAULT_POLL_SCHEDULE } from '../../src/contract/batch-options';

describe('poll schedule', () => {
  const poll = { ...DEFAULT_POLL_SCHEDULE, jitter: 0 };

  it('backs off from the interval up to the cap before anything is learned', () => {
    expect(pollDelayMs(poll, 2)).toBe(15_000);
    expect(pollDelayMs(poll, 3)).toBe(22_500);
    expect(pollDelayMs(poll, 20)).toBe(120_000);
  });

  it('once the latency is known, checks a late job again after a tenth of it, then less often', () => {
    expect(adaptiveDelayMs(poll, 76_000, 76_000)).toBe(7600);
    expect(adaptiveDelayMs(poll, 76_000, 176_000)).toBe(25_000);
    expect(adaptiveDelayMs(poll, 76_000, 1_000_000)).toBe(120_000);
    expect(adaptiveDelayMs(poll, 1000, 1000)).toBe(2000); // never below the floor
  });

  it('checks a job found running before the due age again at that age', () => {
    expect(adaptiveDelayMs(poll, 76_000, 40_000)).toBe(36_000);
    expect(adaptiveDelayMs(poll, 76_000, 72_000)).toBe(7600); // a tenth of it at least
  });

  it('jitters each delay by at most ±jitter and never below 100 ms', () => {
    const jittered = { ...DEFAULT_POLL_SCHEDULE, jitter: 0.2 };
    expect(pollDelayMs(jittered, 2, () => 0)).toBe(12_000);
    expect(pollDelayMs(jittered, 2, () => 0.999_999)).toBe(18_000);
    expect(pollDelayMs({ ...jittered, intervalMs: 10, capMs: 10 }, 2, () => 0)).toBe(100);
  });
});

/** A latency estimate that knows what it is told. */
function learned(dueMs?: number, firstCheckMs?: number) {
  return { dueAge: () => dueMs, firstCheckAge: () => firstCheckMs };
}

describe('nextCheck', () => {
  const poll = { ...DEFAULT_POLL_SCHEDULE, jitter: 0 };

  it('waits for the configured first poll while nothing is learned', () => {
    expect(nextCheck(poll, 1, 'j', 0, learned())).toEqual({ waitMs: 30_000 });
    expect(nextCheck(poll, 1, 'j', 29_000, learned())).toEqual({ waitMs: 1000 });
    expect(nextCheck(poll, 2, 'j', 30_000, learned())).toEqual({ retryDelayMs: 15_000 });
    expect(nextCheck(poll, 4, 'j', 70_000, learned())).toEqual({ retryDelayMs: 33_750 });
  });

  it('once the latency is learned, first checks at the learned age and then after a share of it', () => {
    const estimate = learned(60_000, 54_000);
    expect(nextCheck(poll, 1, 'j', 0, estimate)).toEqual({ waitMs: 54_000 });
    expect(nextCheck(poll, 2, 'j', 54_000, estimate)).toEqual({ retryDelayMs: 6000 });
    expect(nextCheck(poll, 3, 'j', 160_000, estimate)).toEqual({ retryDelayMs: 25_000 });
  });

  it('with adaptive polling off, keeps to the schedule whatever was learned', () => {
    const fixed = { ...poll, adaptive: false };
    const estimate = learned(60_000, 5000);
    expect(nextCheck(fixed, 1, 'j', 10_000, estimate)).toEqual({ waitMs: 20_000 });
    expect(nextCheck(fixed, 2, 'j', 30_000, estimate)).toEqual({ retryDelayMs: 15_000 });
  });

  it('checks a job past its first-check age at once, even on the first attempt', () => {
    expect(nextCheck(poll, 1, 'j', 45_000, learned())).toEqual({ retryDelayMs: 15_000 });
  });

  it('checks at once when the workflow already waited for the first check, whatever the estimate now', () => {
    const estimate = learned(60_000, 54_000); // learned while the timer ran: later than when it was set
    expect(nextCheck(poll, 1, 'j', 30_000, estimate, { firstCheckDue: true })).toEqual({
      retryDelayMs: 30_000, // found running, it is checked again at the due age
    });
    expect(nextCheck(poll, 1, 'j', 30_000, estimate)).toEqual({ waitMs: 24_000 });
  });
});
