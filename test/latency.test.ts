import { describe, expect, it } from 'vitest';
import { LatencyTracker } from '../src/activities/latency';
import { adaptiveDelayMs, pollDelayMs } from '../src/activities/poll-schedule';
import { DEFAULT_POLL_SCHEDULE } from '../src/shared';

describe('LatencyTracker', () => {
  it('knows nothing until ten jobs have finished', () => {
    let now = 0;
    const tracker = new LatencyTracker(() => now);
    for (let i = 0; i < 9; i++) tracker.finished(`j${i}`, 50_000);
    expect(tracker.quantile(0.9)).toBeUndefined();
    tracker.finished('j9', 50_000);
    now += 2000; // past the one-second cache
    expect(tracker.quantile(0.9)).toBe(50_000);
  });

  it('counts jobs still running, so the fastest finishers alone do not set the estimate', () => {
    let now = 0;
    const tracker = new LatencyTracker(() => now);
    for (let i = 0; i < 10; i++) tracker.finished(`fast${i}`, 10_000 + i * 1000);
    for (let i = 0; i < 90; i++) tracker.stillRunning(`slow${i}`, 20_000);
    // 90% of the jobs are known to take longer than 20 s: the 90th percentile is not known yet.
    expect(tracker.quantile(0.9)).toBeUndefined();
    for (let i = 0; i < 90; i++) tracker.finished(`slow${i}`, 40_000 + i * 500);
    now += 2000;
    const q90 = tracker.quantile(0.9)!;
    expect(q90).toBeGreaterThan(70_000);
    expect(q90).toBeLessThanOrEqual(84_500);
  });

  it('estimates the 90th percentile of uniform 40-80 s latencies within a few seconds', () => {
    let now = 0;
    const tracker = new LatencyTracker(() => now);
    for (let i = 0; i < 200; i++) tracker.finished(`j${i}`, 40_000 + ((i * 7919) % 200) * 200);
    now += 2000; // past the one-second cache
    expect(Math.abs(tracker.quantile(0.9)! - 76_000)).toBeLessThan(2000);
  });
});

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
});
