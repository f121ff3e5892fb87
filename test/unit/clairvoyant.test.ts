import { describe, expect, it } from 'vitest';
import { clairvoyantMakespanMs } from '../../bench/clairvoyant';

describe('clairvoyantMakespanMs', () => {
  it('without a rate limit is the longest job', () => {
    expect(clairvoyantMakespanMs([1000, 5000, 3000], 0)).toBe(5000);
  });

  it('with instant jobs is two tokens per job after the burst', () => {
    // 10 jobs, 20 requests, 1 rps, burst 1: the first at 0, the 20th at 19 s.
    expect(clairvoyantMakespanMs(Array<number>(10).fill(0), 1, 1)).toBe(19_000);
  });

  it('submits the longest job first and checks each job the moment it finishes when tokens allow', () => {
    // 2 rps, burst 2: submit 10 s and 1 s jobs at 0; checks at 1 s and 10 s.
    expect(clairvoyantMakespanMs([1000, 10_000], 2, 2)).toBe(10_000);
  });

  it('is never below the old bound minus the burst, nor below the longest job', () => {
    const latencies = Array.from({ length: 300 }, (_, i) => 40_000 + ((i * 7919) % 40_000));
    const ms = clairvoyantMakespanMs(latencies, 5, 5);
    expect(ms).toBeGreaterThanOrEqual(((2 * 300 - 5) / 5) * 1000);
    expect(ms).toBeLessThanOrEqual(((2 * 300) / 5) * 1000 + 80_000);
  });
});
