import { describe, expect, it } from 'vitest';
import { MAX_RETRY_AFTER_MS, parseRetryAfter, readRetryAfter } from '../../src/gateway/retry-after';

const now = Date.parse('2026-11-22T10:00:00Z');

describe('readRetryAfter', () => {
  it('reads seconds, unclamped below the cap', () => {
    expect(readRetryAfter('7', now)).toEqual({ ms: 7000, clamped: false, askedMs: 7000 });
    expect(readRetryAfter(' 1.5 ', now)).toEqual({ ms: 1500, clamped: false, askedMs: 1500 });
    // Exactly the cap is not clamped: an hour-long quota reset is honoured as asked.
    expect(readRetryAfter('3600', now)).toEqual({
      ms: MAX_RETRY_AFTER_MS,
      clamped: false,
      askedMs: 3_600_000,
    });
  });

  it('reads HTTP-dates; a past date is 0, a date beyond the cap is clamped', () => {
    expect(readRetryAfter('Sun, 22 Nov 2026 10:00:30 GMT', now)).toEqual({
      ms: 30_000,
      clamped: false,
      askedMs: 30_000,
    });
    expect(readRetryAfter('Sun, 22 Nov 2026 09:00:00 GMT', now)?.ms).toBe(0);
    expect(readRetryAfter('Mon, 23 Nov 2026 10:00:00 GMT', now)).toEqual({
      ms: MAX_RETRY_AFTER_MS,
      clamped: true,
      askedMs: 24 * 3_600_000,
    });
  });

  it('clamps a millisecond-looking value (read as seconds: 1,000 days) to the cap and says so', () => {
    expect(readRetryAfter('86400000', now)).toEqual({
      ms: MAX_RETRY_AFTER_MS,
      clamped: true,
      askedMs: 86_400_000_000,
    });
    expect(parseRetryAfter('86400000', now)).toBe(MAX_RETRY_AFTER_MS);
    expect(readRetryAfter('99999999999999999999999', now)?.ms).toBe(MAX_RETRY_AFTER_MS);
  });

  it('takes another cap when given one', () => {
    expect(readRetryAfter('120', now, 60_000)).toEqual({ ms: 60_000, clamped: true, askedMs: 120_000 });
  });

  it('is undefined for negative, garbage and missing values (the caller waits its default)', () => {
    for (const v of ['-5', '-0.5', 'soon', '5s', '1e3', '', '   ', 'Sun, 22 Nov 2026', '12:00:00'])
      expect(readRetryAfter(v, now), v).toBeUndefined();
    expect(readRetryAfter(undefined, now)).toBeUndefined();
    expect(readRetryAfter(null, now)).toBeUndefined();
    expect(parseRetryAfter('-5', now)).toBeUndefined();
  });
});
