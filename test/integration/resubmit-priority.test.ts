// A row's submit after one refused with 429 goes one priority ahead of its batch's other calls
// (contract/rate-budget.ts resubmitPriority). The gateway queue is first come first served within a batch:
// at the same priority the row would wait its turn again behind every submit and status check queued
// meanwhile, 30 s and more at a busy gateway's limit (a row refused twice went out a minute late).
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startBatch } from '../../src/client/batches';
import { promptWorkflowId } from '../../src/contract/prompt';
import { resubmitPriority } from '../../src/contract/rate-budget';
import { writeVbenchCsv } from '../../bench/vbench';
import { FAST_POLL, testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

describe('a submit after a 429', () => {
  it('goes one priority ahead of the batch; a batch of priority 1 has none ahead', () => {
    expect(resubmitPriority(3)).toBe(2);
    expect(resubmitPriority(5)).toBe(4);
    expect(resubmitPriority(1)).toBe(1);
  });

  it("is scheduled at the resubmit priority, the row's first submit at the batch's", async () => {
    // A third of the submits are refused with 429 (Retry-After 1 s) before the gateway looks at them.
    env = await testEnv({ jobSeconds: 0.3, faults: { error429: 0.3, scope: 'submit' }, seed: 3 });
    await env.startWorker();
    const csv = join(env.dir, 'in.csv');
    const rows = await writeVbenchCsv(csv, 12, 'all_dimension', 900);
    const { handle, batchId } = await startBatch(env.session, csv, {
      concurrency: 12,
      poll: FAST_POLL,
      outDir: join(env.dir, 'out'),
    });
    expect(await handle.result()).toMatchObject({ succeeded: 12, failed: 0 });
    expect(env.sim.stats().jobsCreated).toBe(12);

    let resubmits = 0;
    for (const [rowId] of rows) {
      const history = await env.client.workflow.getHandle(promptWorkflowId(batchId, rowId!)).fetchHistory();
      const submits = (history.events ?? []).flatMap((e) => {
        const s = e.activityTaskScheduledEventAttributes;
        return s?.activityType?.name === 'submitJob' ? [s.priority?.priorityKey] : [];
      });
      expect(submits[0], `row ${rowId}'s first submit`).toBe(3);
      for (const p of submits.slice(1)) expect(p, `row ${rowId}'s submits: ${submits.join(', ')}`).toBe(2);
      resubmits += submits.length - 1;
    }
    // Every 429 made a resubmit (the fault hits before the gateway looks: no job, no unknown outcome).
    expect(resubmits).toBeGreaterThan(0);
    expect(resubmits).toBe(env.sim.stats().rateLimited);
  });
});
