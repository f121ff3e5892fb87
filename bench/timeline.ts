// Where the rate budget went: the simulator's request log in 10 s buckets, beside the gateway queue's limit as
// the learner applied it (sampled from its query). A flat 50 requests per 10 s is a 5 rps limit used in full.
import type { Client } from '@temporalio/client';
import { gatewayQueue, rateBudgetQuery, rateBudgetWorkflowId } from '../src/contract/rate-budget';

export interface TimelineRow {
  fromS: number;
  submits: number;
  statusChecks: number;
  rateLimited: number;
  /** The queue limit (requests/s) sampled in these 10 s: lowest and highest; null when none was read. */
  limitMin: number | null;
  limitMax: number | null;
}

interface LoggedRequest {
  at: number;
  route: string;
  status: number;
}

/** Samples the learner's applied limit every `everyMs` until stopped. */
export function sampleQueueLimit(client: Client, taskQueue: string, everyMs = 2000) {
  const samples: { at: number; limit: number }[] = [];
  const learner = () => client.workflow.getHandle(rateBudgetWorkflowId(gatewayQueue(taskQueue)));
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const snapshot = await learner()
        .query(rateBudgetQuery)
        .catch(() => undefined); // no learner yet, or it is being replaced
      if (typeof snapshot?.applied === 'number') samples.push({ at: Date.now(), limit: snapshot.applied });
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    samples,
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}

export function timelineRows(
  log: readonly LoggedRequest[],
  limits: readonly { at: number; limit: number }[],
  started: number,
): TimelineRow[] {
  const buckets = new Map<number, TimelineRow>();
  const bucket = (at: number) => {
    const key = Math.max(0, Math.floor((at - started) / 10_000));
    let row = buckets.get(key);
    if (!row) {
      row = { fromS: key * 10, submits: 0, statusChecks: 0, rateLimited: 0, limitMin: null, limitMax: null };
      buckets.set(key, row);
    }
    return row;
  };
  for (const { at, route, status } of log) {
    const row = bucket(at);
    if (status === 429) row.rateLimited += 1;
    else if (route.startsWith('POST')) row.submits += 1;
    else row.statusChecks += 1;
  }
  for (const { at, limit } of limits) {
    const row = bucket(at);
    row.limitMin = Math.min(row.limitMin ?? limit, limit);
    row.limitMax = Math.max(row.limitMax ?? limit, limit);
  }
  return [...buckets.values()].sort((a, b) => a.fromS - b.fromS);
}

export function printTimeline(rows: readonly TimelineRow[], log: (line: string) => void = console.log): void {
  const limit = (r: TimelineRow) =>
    r.limitMin === null
      ? '-'
      : r.limitMin === r.limitMax
        ? r.limitMin.toFixed(2)
        : `${r.limitMin.toFixed(2)}-${r.limitMax!.toFixed(2)}`;
  log('  from    submits  status checks  429s  queue limit (rps)');
  for (const r of rows)
    log(
      `${String(r.fromS).padStart(5)} s ${String(r.submits).padStart(9)} ${String(r.statusChecks).padStart(14)} ${String(r.rateLimited).padStart(5)}  ${limit(r).padStart(17)}`,
    );
}
