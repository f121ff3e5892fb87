// A batch that vidbatch 0.x started and that is still open, as a 1.0 user meets it: 0.x ran batches on the task
// queue `vidbatch`, 1.0 on `vidbatch-1`, so no 1.0 worker ever picks it up. `run` of the same file and
// `status` say so in one message (finish it with a 0.x worker, or cancel it and run the file again), exit 2,
// and `run` starts nothing; `cancel` terminates it, and the file then runs on this version.
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { batchIdFor } from '../../src/client/batches';
import type { BatchInput } from '../../src/contract/batch';
import { DEFAULT_BATCH_OPTIONS } from '../../src/contract/batch-options';
import { DEFAULT_TASK_QUEUE } from '../../src/contract/task-queue';
import { gatewayTarget } from '../../src/config';
import { loadValidCsv } from '../../src/input/csv';
import { vidbatch } from './cli-helpers';
import { testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const OLD_TASK_QUEUE = 'vidbatch';

describe('a batch started by vidbatch 0.x', () => {
  it('is told apart by its task queue: run starts nothing and exits 2, status says the same', async () => {
    env = await testEnv();
    const e = env;
    expect(DEFAULT_TASK_QUEUE).toBe('vidbatch-1');
    const csvPath = join(e.dir, 'old.csv');
    const tag = randomUUID().slice(0, 8);
    await writeFile(csvPath, `id,prompt\nr1,a lighthouse ${tag}\nr2,a harbour ${tag}\n`);
    const csv = await loadValidCsv(csvPath);
    // The batch `run` below names: this file, for the simulator's target, in the default root.
    const batchId = batchIdFor(csv, { target: gatewayTarget(e.sim.baseUrl), root: join(e.dir, 'out') });
    // What a 0.x `run` left: the batch workflow open on the old queue (no worker needed for the test).
    const input: BatchInput = {
      batchId,
      csvPath,
      csvSha256: csv.sha256,
      totalRows: csv.rows.length,
      options: DEFAULT_BATCH_OPTIONS,
    };
    const old = await e.client.workflow.start('batchWorkflow', {
      taskQueue: OLD_TASK_QUEUE,
      workflowId: batchId,
      args: [input],
    });
    try {
      // The CLI's own task queue (the default): only the server and the gateway are given.
      const cliEnv = {
        TEMPORAL_ADDRESS: e.address,
        GATEWAY_BASE_URL: e.sim.baseUrl,
        GATEWAY_API_KEY: e.sim.apiKey,
      };
      const expected =
        `${batchId} was started by vidbatch 0.x and is still open (its workflow runs on task queue "vidbatch"; ` +
        `this version's is "vidbatch-1"), so this version cannot run it. Either finish it with a 0.x worker ` +
        `(\`npx vidbatch@0 worker\` in the old version's checkout), or stop it (\`vidbatch cancel ${batchId}\`, which ` +
        'terminates a 0.x batch) and run the file again: a re-run pays nothing twice (the jobs journal knows every job).';

      const run = await vidbatch(['run', 'old.csv', '--detach'], { cwd: e.dir, env: cliEnv });
      expect(run.code, run.stdout + run.stderr).toBe(2);
      expect(run.stderr).toContain(expected);
      expect(run.stderr).not.toMatch(/Started batch|Attached to/);
      // Nothing was started: the one run of the batch is the old one, still on the old queue.
      const after = await e.client.workflow.getHandle(batchId).describe();
      expect(after.runId).toBe(old.firstExecutionRunId);
      expect(after.taskQueue).toBe(OLD_TASK_QUEUE);
      expect(after.status.name).toBe('RUNNING');

      const status = await vidbatch(['status', batchId], { cwd: e.dir, env: cliEnv });
      expect(status.code, status.stdout + status.stderr).toBe(2);
      expect(status.stderr).toContain(expected);

      // No 1.x worker would ever run a cancellation of it: `cancel` terminates it, and then `run` starts it anew.
      const cancel = await vidbatch(['cancel', batchId], { cwd: e.dir, env: cliEnv });
      expect(cancel.code, cancel.stdout + cancel.stderr).toBe(0);
      expect(cancel.stdout).toContain(`${batchId}: terminated (a 0.x batch`);
      expect((await old.describe()).status.name).toBe('TERMINATED');
      const again = await vidbatch(['run', 'old.csv', '--detach'], { cwd: e.dir, env: cliEnv });
      expect(again.code, again.stdout + again.stderr).toBe(0);
      const restarted = await e.client.workflow.getHandle(batchId).describe();
      expect(restarted.taskQueue).toBe(DEFAULT_TASK_QUEUE);
      await e.client.workflow.getHandle(batchId).terminate('test over');
    } finally {
      if ((await old.describe()).status.name === 'RUNNING') await old.terminate('test over');
    }
  }, 120_000);
});
