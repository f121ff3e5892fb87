// A fresh learner starts from the limit the server kept for the gateway queue and the state its reason
// carries; a worker's watchdog tells a stranded hold from a running one by the same reason.
import { describe, expect, it } from 'vitest';
import { formatReason, holdReason, parseReason, strandedHold } from '../../src/contract/limit-reason';
import { RateLearner, seedState } from '../../src/workflows/rate-learner';

const now = Date.parse('2026-11-25T05:00:00Z');

describe('the limit reason', () => {
  it('carries the learned limit, ceiling, confirmations and pin, and reads them back', () => {
    const reason = formatReason('settled under a 429 at 5.13 rps', {
      learned: 4.6234,
      ceiling: 5.13,
      confirmations: 2,
    });
    expect(reason).toBe(
      'vidbatch: settled under a 429 at 5.13 rps (learned 4.62 rps, ceiling 5.13, confirmed 2)',
    );
    expect(parseReason(reason)).toEqual({
      vidbatch: true,
      state: { learned: 4.62, ceiling: 5.13, confirmations: 2 },
    });
    const hold = holdReason(now + 3000, { learned: 3.6, ceiling: 4, pinned: 7 });
    expect(hold.length).toBeLessThanOrEqual(200); // the server keeps at most 200 characters here
    expect(parseReason(hold)).toEqual({
      vidbatch: true,
      holdUntil: now + 3000,
      state: { learned: 3.6, ceiling: 4, pinned: 7 },
    });
  });

  it('reads older and foreign reasons for what they hold', () => {
    expect(parseReason('vidbatch: slow start (no 429 yet)')).toEqual({ vidbatch: true });
    expect(parseReason('vidbatch: gateway Retry-After, held until 2026-11-25T05:00:03.000Z')).toEqual({
      vidbatch: true,
      holdUntil: now + 3000,
    });
    expect(parseReason('vidbatch: gateway Retry-After, held until soon').holdUntil).toBeNull();
    expect(parseReason('maintenance window')).toEqual({ vidbatch: false });
    expect(parseReason(undefined)).toEqual({ vidbatch: false });
  });

  it('tells a stranded queue from a live hold or a running limit', () => {
    const hold = (until: number) => ({ rps: 0, reason: holdReason(until, { learned: 4 }) });
    expect(strandedHold(hold(now + 5000), now, 2000)).toBe(false); // still held
    expect(strandedHold(hold(now - 1000), now, 2000)).toBe(false); // its learner is restoring it
    expect(strandedHold(hold(now - 3000), now, 2000)).toBe(true);
    expect(strandedHold({ rps: 0, reason: 'vidbatch: gateway Retry-After, held until ?' }, now, 2000)).toBe(
      true,
    );
    expect(strandedHold({ rps: 0, reason: 'paused by hand' }, now, 2000)).toBe(true);
    expect(strandedHold({ rps: 4, reason: 'vidbatch: slow start (no 429 yet)' }, now, 2000)).toBe(false);
    expect(strandedHold({ rps: null, reason: '' }, now, 2000)).toBe(false);
  });
});

describe('seedState', () => {
  it('starts where the last learner stopped: its learned limit and ceiling, a plateau before probing', () => {
    const state = seedState(
      {
        rps: 4.62,
        reason: formatReason('settled under a 429 at 5.13 rps', {
          learned: 4.62,
          ceiling: 5.13,
          confirmations: 1,
        }),
      },
      now,
    );
    expect(state).toMatchObject({ limit: 4.62, ceiling: 5.13, confirmations: 1, holdUntil: 0, pinned: null });
    expect(state.plateauMs).toBe(10_000);
    const learner = new RateLearner(now, state);
    expect(learner.target(now)).toBe(4.62);
    expect(learner.nextChangeAt(now)).toBeUndefined(); // no reports: nothing to grow for
  });

  it('keeps a hold only while its end is ahead; a stale or unreadable one gives way to the learned limit', () => {
    const carried = { learned: 3.6, ceiling: 4 };
    const live = seedState({ rps: 0, reason: holdReason(now + 4000, carried) }, now);
    expect(new RateLearner(now, live).target(now)).toBe(0);
    expect(new RateLearner(now, live).target(now + 4000)).toBe(3.6);
    const stale = seedState({ rps: 0, reason: holdReason(now - 1, carried) }, now);
    expect(new RateLearner(now, stale).target(now)).toBe(3.6);
    const unreadable = seedState(
      { rps: 0, reason: 'vidbatch: gateway Retry-After, held until ? (learned 3.60 rps, ceiling 4.00)' },
      now,
    );
    expect(new RateLearner(now, unreadable).target(now)).toBe(3.6);
  });

  it('seeds the limit alone from a limit someone else set, and the pin a pinned learner carried', () => {
    const foreign = seedState({ rps: 2.5, reason: 'set by ops' }, now);
    expect(foreign).toMatchObject({ limit: 2.5, pinned: null });
    expect(foreign.ceiling).toBeUndefined();
    const older = seedState({ rps: 3.2, reason: 'vidbatch: settled under a 429 at 3.50 rps' }, now);
    expect(older.limit).toBe(3.2);
    expect(older.ceiling).toBeUndefined();
    const pinned = seedState(
      { rps: 7, reason: formatReason('pinned by an operator (--gateway-rps)', { learned: 4, pinned: 7 }) },
      now,
    );
    expect(new RateLearner(now, pinned).target(now)).toBe(7);
  });

  it('starts slow without a limit, or from a 0 that is not a vidbatch hold', () => {
    expect(seedState(null, now).limit).toBe(4);
    expect(seedState({ rps: null, reason: '' }, now).limit).toBe(4);
    const paused = seedState({ rps: 0, reason: 'paused by hand' }, now);
    expect(new RateLearner(now, paused).target(now)).toBe(4);
  });
});
