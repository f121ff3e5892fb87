// Each batch's share of the gateway budget, as the learner sees it: the workers report their gateway
// dispatches per fairness key (the batch id), and this keeps the last half minute of them. Pure (time passed
// in); not carried across continue-as-new, since it describes only the recent past.
import type { BatchShare } from '../contract/rate-budget';

/** Shares are over this long: long enough to be steady, short enough to show a batch that just started. */
export const SHARE_WINDOW_MS = 30_000;

export class BatchShares {
  private readonly arrivals: { at: number; byBatch: Record<string, number> }[] = [];

  add(now: number, byBatch: Record<string, number> | undefined): void {
    if (byBatch && Object.keys(byBatch).length > 0) this.arrivals.push({ at: now, byBatch });
    while (this.arrivals.length > 0 && this.arrivals[0]!.at <= now - SHARE_WINDOW_MS) this.arrivals.shift();
  }

  /** Dispatches per batch over the window, largest first, with the share of all and the rate. */
  shares(now: number): BatchShare[] {
    const totals = new Map<string, number>();
    let oldest = now;
    for (const { at, byBatch } of this.arrivals) {
      if (at <= now - SHARE_WINDOW_MS) continue;
      oldest = Math.min(oldest, at);
      for (const [batch, n] of Object.entries(byBatch)) totals.set(batch, (totals.get(batch) ?? 0) + n);
    }
    const all = [...totals.values()].reduce((a, b) => a + b, 0);
    // Each report covers about the second before it.
    const seconds = Math.max(1, (now - oldest) / 1000 + 1);
    return [...totals]
      .map(([batch, dispatched]) => ({
        batch,
        dispatched,
        share: all > 0 ? dispatched / all : 0,
        rps: dispatched / seconds,
      }))
      .sort((a, b) => b.dispatched - a.dispatched);
  }
}

/** The learner's current details in the Web UI: the limit and each batch's share. */
export function budgetMarkdown(limit: number | null, reason: string, shares: BatchShare[]): string {
  const lines = [
    `**Gateway queue limit: ${limit === null ? 'not set yet' : `${limit} requests/s`}** (${reason})`,
  ];
  if (shares.length === 0) lines.push('', 'No gateway calls in the last 30 s.');
  else {
    lines.push('', `Share of gateway calls over the last ${SHARE_WINDOW_MS / 1000} s:`, '');
    lines.push('| batch | calls | share | requests/s |', '|---|---|---|---|');
    for (const s of shares)
      lines.push(`| ${s.batch} | ${s.dispatched} | ${Math.round(s.share * 100)}% | ${s.rps.toFixed(2)} |`);
  }
  return lines.join('\n');
}
