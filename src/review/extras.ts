// THE ONE PLACE where the spend ledger and the user's prices reach the gallery (issue 19, section 3). Until
// they are wired in, the page shows no ledger line and no costs; every field is optional in the page.
//
// MERGE (lead): with src/results/ledger.ts and src/results/prices.ts on the branch, fill this in, e.g.
//   const ledger = computeLedger(...);  return {
//     ledger: formatLedger(ledger),
//     estimateCost: prices && ((row) => estimateCost(row, prices)),
//   };
// and give `vidbatch review` the same price flags as `run`/`plan` (passed in as `prices`). Verification
// (section 2) needs no wiring: data.ts reads `verification` from each manifest row when it is there.
import type { ReviewExtras, ReviewSources } from './data';

export function reviewExtras(_sources: ReviewSources, _outDir: string, _prices?: unknown): ReviewExtras {
  return {};
}
