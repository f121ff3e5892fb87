// The wait for a new job's first status check on the gateway queue, where every dispatch takes a token of the
// shared budget (docs/rate-budget.md). The due check comes at the age by which 90% of jobs have finished (a
// workflow timer). A job is also checked before that, from the age by which half the jobs have finished, with budget nobody else wants: those checks run at
// the lowest priority, so the server dispatches them only when no submission or due check of any batch is
// waiting. A busy budget loses nothing to them; an idle one (the end of a batch, a small batch) finds jobs
// finished sooner than the due check would.
import { CancellationScope, isCancellation, proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { PollInput } from '../activities/jobs';
import { RETRY_POLICIES } from '../contract/failures';
import { SPARE_PRIORITY, type gatewayActivityOptions } from '../contract/rate-budget';
import type { PollOutcome } from '../contract/jobs';

export interface FirstCheckWait {
  /** The prompt's gateway activity options (queue, fairness key, priority). */
  gateway: Partial<ReturnType<typeof gatewayActivityOptions>>;
  /** When the due check goes (epoch ms). */
  dueAt: number;
  /** From when spare checks may go (epoch ms); undefined: none. */
  spareFrom: number | undefined;
  /** The pollJob input of a check of this job (checkNow is set here). */
  poll: Omit<PollInput, 'checkNow' | 'spare'>;
  activityTimeoutMs: number;
  intervalMs: number;
}

/** Whether spare checks can help: known from-age before the due check, and a batch that is not last already. */
export function spareChecksApply(w: Pick<FirstCheckWait, 'gateway' | 'dueAt' | 'spareFrom'>): boolean {
  const priority = w.gateway.priority?.priorityKey;
  return (
    w.spareFrom !== undefined && w.spareFrom < w.dueAt && priority !== undefined && priority < SPARE_PRIORITY
  );
}

/**
 * Waits until the due check, checking at spare priority meanwhile. Returns the outcome a spare check found
 * (the job finished or failed), or undefined when the due check should go now. A cancel of the prompt
 * rejects with the cancellation, as the timer alone would.
 */
export async function waitWithSpareChecks(w: FirstCheckWait): Promise<PollOutcome | undefined> {
  const { pollJob } = proxyActivities<Activities>({
    ...w.gateway,
    priority: { ...w.gateway.priority, priorityKey: SPARE_PRIORITY },
    startToCloseTimeout: w.activityTimeoutMs,
    retry: RETRY_POLICIES.pollJob(w.intervalMs),
  });
  const spareScope = new CancellationScope();
  const dueScope = new CancellationScope();
  const spare = spareScope
    .run(async () => {
      if (w.spareFrom! > Date.now()) await sleep(w.spareFrom! - Date.now());
      return pollJob.executeWithOptions({ summary: `spare status check of job ${w.poll.jobId}` }, [
        { ...w.poll, checkNow: true, spare: true },
      ]);
    })
    .then(
      (outcome) => ({ outcome }),
      (error: unknown) => ({ error }),
    );
  const due = dueScope.run(() =>
    sleep(Math.max(1, w.dueAt - Date.now()), { summary: `first status check of job ${w.poll.jobId}` }),
  );
  due.catch(() => undefined); // cancelled below once a spare check has the answer
  const first = await Promise.race([spare, due.then(() => 'due' as const)]);
  if (first !== 'due') {
    dueScope.cancel();
    if ('outcome' in first) return first.outcome;
    // A cancel of the prompt is the caller's; a failed spare check (a refused key, ...) is the due check's to
    // meet and handle, now.
    if (isCancellation(first.error) && CancellationScope.current().consideredCancelled) throw first.error;
    return undefined;
  }
  spareScope.cancel();
  const late = await spare; // an answer that came with the cancel is kept
  return 'outcome' in late ? late.outcome : undefined;
}

/**
 * Waits for a job's first check: with spare checks when they can help, else a timer. The outcome a spare check
 * found, or undefined when the due check should go now.
 */
export async function waitForFirstCheck(w: FirstCheckWait): Promise<PollOutcome | undefined> {
  if (spareChecksApply(w)) return waitWithSpareChecks(w);
  if (w.dueAt > Date.now())
    await sleep(w.dueAt - Date.now(), { summary: `first status check of job ${w.poll.jobId}` });
  return undefined;
}
