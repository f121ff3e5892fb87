// A gateway queue is never stranded at 0: a real `vidbatch worker` process, with nothing to dispatch, notices
// that the learner was terminated during a hold and starts a fresh one, which restores the learned limit once
// the hold's Retry-After is up. A worker does not start the learner just by starting.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { describeQueueLimit } from '../../src/activities/rate-budget';
import { parseReason, type QueueLimit } from '../../src/contract/limit-reason';
import {
  gatewayQueue,
  rateBudgetQuery,
  rateBudgetWorkflowId,
  rateReportSignal,
  type RateReport,
} from '../../src/contract/rate-budget';
import { startSimulator } from '../../src/simulator/server';
import type { rateBudgetWorkflow } from '../../src/workflows/rate-budget';
import { background } from './cli-helpers';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const report = (over: Partial<RateReport>): RateReport => ({
  worker: 'test',
  dispatched: 0,
  answered: { submit: 0, status: 0 },
  rateLimited: { submit: 0, status: 0 },
  retryAfterMs: 0,
  ...over,
});

async function until<T>(what: string, f: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('the gateway queue watchdog', () => {
  it('replaces a learner terminated during a hold: the limit comes back, seeded from the last one', async () => {
    const address = inject('temporalAddress');
    const sim = await startSimulator({ jobSeconds: 1, recordRequests: true });
    cleanups.push(() => sim.close());
    const connection = await Connection.connect({ address });
    cleanups.push(() => connection.close());
    const client = new Client({ connection });
    const taskQueue = `watchdog-${randomUUID()}`;
    const queue = gatewayQueue(taskQueue);
    const learnerId = rateBudgetWorkflowId(queue);
    const readLimit = (): Promise<QueueLimit> =>
      describeQueueLimit(connection.workflowService, 'default', queue);

    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-watchdog-'));
    const worker = background(['worker'], {
      cwd: dir,
      env: {
        TEMPORAL_ADDRESS: address,
        VIDBATCH_TASK_QUEUE: taskQueue,
        GATEWAY_BASE_URL: sim.baseUrl,
        GATEWAY_API_KEY: sim.apiKey,
      },
    });
    cleanups.push(() => worker.stop());
    await worker.waitFor(/vidbatch worker polling task queue/);

    // Starting a worker starts no learner (that waits for its first gateway dispatch).
    await expect(client.workflow.getHandle(learnerId).describe()).rejects.toBeInstanceOf(
      WorkflowNotFoundError,
    );

    // A learner as a worker starts it, told of a gateway-wide pause: status checks refused with a long
    // Retry-After. It cuts its limit (0.9 x about 4 rps) and holds the queue at 0 until the Retry-After is up.
    const first = await client.workflow.signalWithStart<typeof rateBudgetWorkflow, [RateReport]>(
      'rateBudgetWorkflow',
      {
        workflowId: learnerId,
        taskQueue,
        args: [{ gatewayQueue: queue }],
        signal: rateReportSignal,
        signalArgs: [
          report({
            dispatched: 11,
            answered: { submit: 2, status: 8 },
            rateLimited: { submit: 0, status: 1 },
            retryAfterMs: 8000,
          }),
        ],
      },
    );
    const held = await until('the hold', async () => {
      const limit = await readLimit();
      return limit.rps === 0 ? limit : undefined;
    });
    const { holdUntil, state: learned } = parseReason(held.reason);
    expect(typeof holdUntil).toBe('number');
    expect(learned?.learned).toBeGreaterThan(3);
    expect(learned?.ceiling).toBeGreaterThan(learned!.learned);

    // The learner dies while the queue is at 0: nothing can be dispatched, so no report would revive it.
    await first.terminate('test: learner lost during a hold');

    const restored = await until('the limit restored', async () => {
      const limit = await readLimit();
      return limit.rps !== null && limit.rps > 0 ? limit : undefined;
    });
    const restoredAt = Date.now();
    expect(restored.rps).toBe(learned!.learned); // the learned limit, not a slow start from 4
    expect(Date.now()).toBeGreaterThanOrEqual(holdUntil as number); // the hold was kept to its end
    expect(parseReason(restored.reason).state).toMatchObject(learned!);

    // A new learner run, seeded from what the last one learned.
    const fresh = client.workflow.getHandle(learnerId);
    const description = await fresh.describe();
    expect(description.runId).not.toBe(first.signaledRunId);
    expect(description.status.name).toBe('RUNNING');
    const snapshot = await fresh.query(rateBudgetQuery);
    expect(snapshot.state).toMatchObject({
      limit: learned!.learned,
      ceiling: learned!.ceiling,
      holdUntil: 0,
    });
    expect(snapshot.applied).toBe(learned!.learned);

    // Nothing went to the gateway, and the worker said what it did.
    expect(sim.state.requestLog).toEqual([]);
    const line = await worker.waitFor(
      /gateway queue \S+ was still at 0 requests\/s .* asked its rate-budget learner.*/,
    );
    console.log(
      `restored ${((restoredAt - holdUntil!) / 1000).toFixed(1)} s after the hold's end; worker: ${line[0]}`,
    );
    const stopped = await worker.stop();
    expect(stopped.code).toBe(0);
  }, 120_000);
});
