import { describe, expect, it } from 'vitest';
import { BatchShares, budgetMarkdown, SHARE_WINDOW_MS } from '../../src/workflows/batch-shares';

describe('BatchShares', () => {
  it("gives each batch's share of the dispatches over the last 30 s, largest first", () => {
    const shares = new BatchShares();
    const t0 = 1_000_000;
    for (let s = 0; s < 10; s++) shares.add(t0 + s * 1000, { a: 3, b: 1 });
    shares.add(t0 + 10_000, undefined); // a worker from before shares: counted nowhere
    const now = t0 + 10_000;
    const [a, b] = shares.shares(now);
    expect(a).toMatchObject({ batch: 'a', dispatched: 30, share: 0.75 });
    expect(b).toMatchObject({ batch: 'b', dispatched: 10, share: 0.25 });
    expect(a!.rps).toBeCloseTo(30 / 11, 5); // ten reports, each covering the second before it
  });

  it('forgets dispatches older than the window', () => {
    const shares = new BatchShares();
    shares.add(0, { old: 50 });
    shares.add(SHARE_WINDOW_MS + 1, { now: 2 });
    expect(shares.shares(SHARE_WINDOW_MS + 1).map((s) => s.batch)).toEqual(['now']);
  });

  it('renders the limit and a row per batch for the Web UI', () => {
    const md = budgetMarkdown(4.75, 'vidbatch: settled', [
      { batch: 'batch-1', dispatched: 60, share: 0.6, rps: 2.85 },
      { batch: 'batch-2', dispatched: 40, share: 0.4, rps: 1.9 },
    ]);
    expect(md).toContain('**Gateway queue limit: 4.75 requests/s**');
    expect(md).toContain('| batch-1 | 60 | 60% | 2.85 |');
    expect(md).toContain('| batch-2 | 40 | 40% | 1.90 |');
    expect(budgetMarkdown(null, 'x', [])).toContain('No gateway calls');
  });
});
