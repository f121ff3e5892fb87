// Where the rate budget went: the simulator's request log in 10 s buckets, beside the gateway queue's limit as
// the learner applied it (sampled from its query). A flat 50 requests per 10 s is a 5 rps limit used in full.
// And the last jobs made, with their rows' submits from the prompt histories (lastSubmits): what a slow tail
// waited for.
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { FailureType } from '../src/contract/failures';
import { promptWorkflowId } from '../src/contract/prompt';
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

/** One of the last jobs made: its row's submit activities, each queued on the gateway queue and sent (or not). */
export interface LastSubmit {
  batchId: string;
  rowId: string;
  madeAtS: number;
  /** In order: when the submit was queued and when a worker took it (s from the start), and if it ended in a 429. */
  submits: { queuedAtS: number; sentAtS: number | null; refused: boolean }[];
}

const EventType = proto.temporal.api.enums.v1.EventType;
const epochMs = (t: proto.google.protobuf.ITimestamp | null | undefined) =>
  t ? Number(t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6) : 0;

/**
 * The rows of the last `n` jobs the gateway made, with their submits read from their prompt histories: when each
 * was queued on the gateway queue and taken by a worker, and whether it was refused. A submit waits behind every
 * call of its batch queued before it (30 s and more at a busy gateway's limit); a resubmit after a 429 goes
 * ahead of them (contract/rate-budget.ts resubmitPriority).
 */
export async function lastSubmits(
  client: Client,
  jobs: readonly { createdAt: number; idempotencyKey?: string }[],
  started: number,
  n = 5,
): Promise<LastSubmit[]> {
  const last = [...jobs].sort((a, b) => a.createdAt - b.createdAt).slice(-n);
  const out: LastSubmit[] = [];
  for (const job of last) {
    // vidbatch:<batch id>:<row id>[:g<generation>] (activities/jobs.ts idempotencyKey)
    const m = /^vidbatch:([^:]+):(.+?)(?::g\d+)?$/.exec(job.idempotencyKey ?? '');
    if (!m) continue;
    const [, batchId, rowId] = m as unknown as [string, string, string];
    const submits: LastSubmit['submits'] = [];
    const history = await client.workflow
      .getHandle(promptWorkflowId(batchId, rowId))
      .fetchHistory()
      .catch(() => undefined);
    const byScheduled = new Map<number, LastSubmit['submits'][number]>();
    const at = (e: proto.temporal.api.history.v1.IHistoryEvent) =>
      Math.round((epochMs(e.eventTime) - started) / 100) / 10;
    for (const e of history?.events ?? []) {
      const scheduled = e.activityTaskScheduledEventAttributes;
      if (scheduled?.activityType?.name === 'submitJob') {
        const submit = { queuedAtS: at(e), sentAtS: null, refused: false };
        byScheduled.set(Number(e.eventId), submit);
        submits.push(submit);
      } else if (e.activityTaskStartedEventAttributes) {
        const submit = byScheduled.get(Number(e.activityTaskStartedEventAttributes.scheduledEventId));
        if (submit) submit.sentAtS = at(e);
      } else if (e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED) {
        const failed = e.activityTaskFailedEventAttributes!;
        const submit = byScheduled.get(Number(failed.scheduledEventId));
        if (submit) submit.refused = failed.failure?.applicationFailureInfo?.type === FailureType.RateLimited;
      }
    }
    out.push({ batchId, rowId, madeAtS: Math.round((job.createdAt - started) / 100) / 10, submits });
  }
  return out;
}

export function printLastSubmits(
  rows: readonly LastSubmit[],
  log: (line: string) => void = console.log,
): void {
  log(
    `the last ${rows.length} jobs made, and their rows' submits (queued -> taken by a worker, 429 if refused):`,
  );
  for (const r of rows)
    log(
      `${r.madeAtS.toFixed(1).padStart(7)} s  ${r.rowId.padEnd(10)} ` +
        r.submits
          .map(
            (s) => `${s.queuedAtS.toFixed(1)} -> ${s.sentAtS?.toFixed(1) ?? '-'}${s.refused ? ' (429)' : ''}`,
          )
          .join(', '),
    );
}
