// The rate-budget learner: one long-lived workflow per gateway queue (id `vidbatch-rate-budget:<queue>`),
// started by the first worker that signals it (signal-with-start). Every worker reports its gateway calls and
// 429s; the learner (rate-learner.ts) turns them into the queue's server-side rate limit, which it applies with
// an activity, only when it changes and at most about once a second (a hold, or its end, at once). Its state
// is the workflow's, so it survives worker and server restarts; each run re-applies it first, since a crashed
// learner may have left the queue paused or raised. It continues as new before its history grows large.
import {
  condition,
  continueAsNew,
  log,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { RateBudgetActivities } from '../activities/rate-budget';
import {
  PATCH_LEARNER_V2,
  pinRateSignal,
  rateBudgetQuery,
  rateReportSignal,
  type RateBudgetInput,
  type RateBudgetSnapshot,
} from '../contract/rate-budget';
import { BatchShares, budgetMarkdown } from './batch-shares';
import { LEARNER_V1, RateLearner } from './rate-learner';

const { applyQueueLimit } = proxyActivities<RateBudgetActivities>({
  startToCloseTimeout: '10s',
  retry: { initialInterval: '500ms', maximumInterval: '10s' },
});

const MIN_APPLY_INTERVAL_MS = 1000; // each write persists the queue's user data
const MAX_HISTORY_EVENTS = 2000;

export async function rateBudgetWorkflow(input: RateBudgetInput): Promise<void> {
  const { gatewayQueue } = input;
  // Learners started before the patch keep the first version's settings (their commands depend on them).
  const learner = new RateLearner(Date.now(), input.state, patched(PATCH_LEARNER_V2) ? {} : LEARNER_V1);
  const shares = new BatchShares();
  let applied: number | null = null; // unknown until this run applies it
  let appliedAt = 0;
  // Reports arrive about once a second per worker; only a 429 or a pin needs the loop before its next tick.
  let messages = 0;
  let urgent = 0;

  // Defined before the handlers: signal-with-start's signal is delivered as soon as its handler is set.
  const reason = (now: number, rps: number): string => {
    const s = learner.state;
    if (rps === 0) return `vidbatch: gateway Retry-After, held until ${new Date(s.holdUntil).toISOString()}`;
    if (s.pinned !== null) return `vidbatch: pinned by an operator (--gateway-rps)`;
    if (s.ceiling === undefined) return 'vidbatch: slow start (no 429 yet)';
    const probing = now - s.cutAt >= s.plateauMs;
    return `vidbatch: ${probing ? 'probing above' : 'settled under'} a 429 at ${s.ceiling.toFixed(2)} rps`;
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
  setHandler(pinRateSignal, ({ worker, rps }) => {
    messages += 1;
    urgent += 1;
    if (rps !== learner.state.pinned) log.info('gateway rate pinned', { worker, rps });
    learner.pin(rps);
  });
  setHandler(rateBudgetQuery, (): RateBudgetSnapshot => ({
    gatewayQueue,
    applied,
    state: learner.state,
    dispatchRate: learner.dispatchRate(Date.now()),
    reports: learner.reports,
    rateLimited: learner.rateLimited,
    batches: shares.shares(Date.now()),
  }));

  for (;;) {
    const now = Date.now();
    learner.grow(now);
    const target = learner.target(now);
    let dueAt: number | undefined;
    if (target !== applied) {
      const urgent = applied === null || target === 0 || applied === 0;
      dueAt = urgent ? now : appliedAt + MIN_APPLY_INTERVAL_MS;
      if (dueAt <= now) {
        await applyQueueLimit({ gatewayQueue, rps: target, reason: reason(now, target) });
        applied = target;
        appliedAt = Date.now();
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
