// The rate-budget learner: one long-lived workflow per gateway queue (id `vidbatch-rate-budget:<queue>`),
// started by the first worker that signals it (signal-with-start: a worker's first gateway dispatch, or its
// watchdog finding the queue stranded at 0). Every worker reports its gateway calls and 429s; the learner
// (rate-learner.ts) turns them into the queue's server-side rate limit, which it applies with an activity,
// only when it changes and at most about once a second (a hold, or its end, at once). Its state is the
// workflow's, so it survives worker and server restarts; each run re-applies it first, since a crashed
// learner may have left the queue paused or raised. A fresh learner (no carried state) starts from the limit
// the server kept and the state its reason carries (contract/limit-reason.ts). It continues as new before its
// history grows large.
import {
  condition,
  continueAsNew,
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { RateBudgetActivities } from '../activities/rate-budget';
import { formatReason, holdReason, type QueueLimit } from '../contract/limit-reason';
import {
  nudgeSignal,
  pinRateSignal,
  rateBudgetQuery,
  rateReportSignal,
  type RateBudgetInput,
  type RateBudgetSnapshot,
} from '../contract/rate-budget';
import { BatchShares, budgetMarkdown } from './batch-shares';
import { RateLearner, seedState } from './rate-learner';

const { applyQueueLimit } = proxyActivities<RateBudgetActivities>({
  startToCloseTimeout: '10s',
  retry: { initialInterval: '500ms', maximumInterval: '10s' },
});
// A few tries only: a learner that cannot read the last limit starts slow rather than not at all.
const { readQueueLimit } = proxyActivities<RateBudgetActivities>({
  startToCloseTimeout: '10s',
  retry: { initialInterval: '500ms', maximumAttempts: 3 },
});

/** The queue's limit as the server kept it, or null if it cannot be read. */
async function lastLimit(gatewayQueue: string): Promise<QueueLimit | null> {
  try {
    return await readQueueLimit({ gatewayQueue });
  } catch (err) {
    log.warn('could not read the gateway queue limit; starting slow', { error: String(err) });
    return null;
  }
}

const MIN_APPLY_INTERVAL_MS = 1000; // each write persists the queue's user data
const MAX_HISTORY_EVENTS = 2000;

export async function rateBudgetWorkflow(input: RateBudgetInput): Promise<void> {
  const { gatewayQueue } = input;
  // Signals that arrive meanwhile wait in the SDK's buffer until their handlers are set below.
  const last = input.state ? null : await lastLimit(gatewayQueue);
  const state = input.state ?? seedState(last, Date.now());
  const learner = new RateLearner(Date.now(), state);
  const shares = new BatchShares();
  // What the server has, when this run read it: a learner whose start is the limit already there (a worker's
  // watchdog sets the slow start before any learner runs) does not write it again, and so its first cut, a
  // second later, is not held back by the interval between writes.
  let applied: number | null = last?.rps ?? null;
  let appliedAt = 0;
  let appliedHold = 0;
  if (applied !== null) {
    learner.applied(Date.now(), applied);
    appliedHold = learner.state.holdUntil;
  }
  // Reports arrive about once a second per worker; only a 429 or a pin needs the loop before its next tick.
  let messages = 0;
  let urgent = 0;

  // Defined before the handlers: signal-with-start's signal is delivered as soon as its handler is set.
  const reason = (now: number, rps: number): string => {
    const s = learner.state;
    // The reason carries what a new learner is seeded from (contract/limit-reason.ts).
    const carried = {
      learned: s.limit,
      ceiling: s.ceiling,
      confirmations: s.confirmations,
      pinned: s.pinnedBy === 'gateway' ? undefined : (s.pinned ?? undefined),
    };
    if (rps === 0) return holdReason(s.holdUntil, carried);
    let what: string;
    if (s.pinned !== null)
      what =
        s.pinnedBy === 'gateway'
          ? 'under the limit the gateway publishes (RateLimit-Policy)'
          : 'pinned by an operator (--gateway-rps)';
    else if (s.ceiling === undefined) what = 'slow start (no 429 yet)';
    else {
      const probing = now - s.cutAt >= s.plateauMs;
      what = `${probing ? 'probing above' : 'settled under'} a 429 at ${s.ceiling.toFixed(2)} rps`;
    }
    return formatReason(what, carried);
  };

  setHandler(rateReportSignal, (report) => {
    messages += 1;
    if (report.rateLimited.submit + report.rateLimited.status > 0) urgent += 1;
    learner.report(Date.now(), report);
    shares.add(Date.now(), report.byBatch);
    // The Web UI shows these details on the learner's page: the limit, and each batch's share of it.
    const why = applied === null ? 'not applied yet' : reason(Date.now(), applied);
    setCurrentDetails(budgetMarkdown(applied, why, shares.shares(Date.now())));
  });
  setHandler(pinRateSignal, ({ worker, rps, by }) => {
    messages += 1;
    urgent += 1;
    if (rps !== learner.state.pinned) log.info('gateway rate pinned', { worker, rps, by: by ?? 'operator' });
    learner.pin(rps, by);
  });
  // A worker's watchdog found the queue at 0 past its hold's end: apply the target again, whatever this run
  // believes it applied (someone else may have set the limit).
  setHandler(nudgeSignal, ({ worker, why }) => {
    messages += 1;
    urgent += 1;
    log.warn("gateway queue limit re-applied at a worker's request", { worker, why });
    applied = null;
  });
  setHandler(rateBudgetQuery, (): RateBudgetSnapshot => ({
    gatewayQueue,
    applied,
    state: learner.state,
    dispatchRate: learner.dispatchRate(Date.now()),
    reports: learner.reports,
    rateLimited: learner.rateLimited,
    batches: shares.shares(Date.now()),
    why: applied === null ? 'not applied yet' : reason(Date.now(), applied),
  }));

  for (;;) {
    const now = Date.now();
    learner.grow(now);
    const target = learner.target(now);
    // A hold made longer is written again, so the reason names its real end (the watchdogs read it).
    const holdMoved = target === 0 && applied === 0 && appliedHold !== learner.state.holdUntil;
    let dueAt: number | undefined;
    if (target !== applied || holdMoved) {
      // A cut answers a 429 and goes at once (at most one per 429 episode); growth waits the interval.
      const urgent = applied === null || target === 0 || applied === 0 || target < applied;
      dueAt = urgent ? now : appliedAt + MIN_APPLY_INTERVAL_MS;
      if (dueAt <= now) {
        await applyQueueLimit({ gatewayQueue, rps: target, reason: reason(now, target) });
        applied = target;
        appliedAt = Date.now();
        appliedHold = learner.state.holdUntil;
        learner.applied(appliedAt, target);
        continue;
      }
    }
    const info = workflowInfo();
    if (info.historyLength >= MAX_HISTORY_EVENTS || info.continueAsNewSuggested) {
      await continueAsNew<typeof rateBudgetWorkflow>({ gatewayQueue, state: learner.state });
    }
    const wake = [dueAt, learner.nextChangeAt(now)].filter((t): t is number => t !== undefined);
    const [seen, seenUrgent] = [messages, urgent];
    if (wake.length === 0) await condition(() => messages !== seen);
    else await condition(() => urgent !== seenUrgent, Math.max(1, Math.min(...wake) - now));
  }
}
