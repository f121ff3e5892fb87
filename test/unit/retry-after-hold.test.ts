import { afterEach, describe, expect, it, vi } from 'vitest';
import { NotSentError, WorkerStoppingError } from '../../src/gateway/errors';
import { RetryAfterHolds } from '../../src/gateway/retry-after-hold';

describe('RetryAfterHolds', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('holds only the kind that got the 429, for its Retry-After', async () => {
    const holds = new RetryAfterHolds();
    holds.hold('status', 150);
    expect(holds.remainingMs('submit')).toBe(0);
    await holds.wait('submit', 0); // submissions go on at once
    const started = Date.now();
    await holds.wait('status', 1000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect(holds.remainingMs('status')).toBe(0);
  });

  it('lets held calls go spread over a second past the hold, never past what each may wait', async () => {
    vi.useFakeTimers();
    const spread = [0, 0.5, 0.9];
    const holds = new RetryAfterHolds(Date.now, () => spread.shift() ?? 0);
    const start = Date.now();
    holds.hold('submit', 1000);
    const sentAt: number[] = [];
    const calls = [5000, 5000, 1200].map((maxWaitMs) =>
      holds.wait('submit', maxWaitMs).then(() => sentAt.push(Date.now() - start)),
    );
    await vi.advanceTimersByTimeAsync(3000);
    await Promise.all(calls);
    // All at once at 1000 ms they outran the gateway's refilled burst; the last may wait 1.2 s at most.
    expect(sentAt).toEqual([1000, 1200, 1500]);
  });

  it('turns a hold longer than the caller can wait into NotSentError with the time to come back', async () => {
    let now = 1_000_000;
    const holds = new RetryAfterHolds(
      () => now,
      () => 0.5,
    );
    holds.hold('submit', 20_000);
    now += 5000;
    const err = await holds.wait('submit', 1000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotSentError);
    // The hold's end (15 s away), spread by up to a second so held calls do not all come back at once.
    expect((err as NotSentError).retryAfterMs).toBe(15_500);
    // A later, shorter Retry-After never shortens a hold.
    holds.hold('submit', 1000);
    expect(holds.remainingMs('submit')).toBe(15_000);
  });

  it('a call waiting out a hold when the worker stops is turned away, and so is every later one', async () => {
    const holds = new RetryAfterHolds();
    holds.hold('status', 5000);
    const waiting = holds.wait('status', 10_000).catch((e: unknown) => e);
    holds.close((kind) => new WorkerStoppingError(kind));
    expect(await waiting).toBeInstanceOf(WorkerStoppingError);
    await expect(holds.wait('submit', 0)).rejects.toBeInstanceOf(WorkerStoppingError);
  });
});
