// A prompt that ends without telling its batch (someone terminated it): the run that started it hears of it
// from the child's end, and the endedPrompts activity, which later runs ask about the prompts they took over,
// finds it on the server with the row's own fields. Against a real Temporal server and the simulator.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { writeVbenchCsv } from '../../bench/vbench';
import { createPromptActivities, type EndedPromptsInput } from '../../src/activities/prompts';
import { startBatch } from '../../src/client/batches';
import { promptWorkflowId, WORKFLOW_FAILED_CODE, type PromptResult } from '../../src/contract/prompt';
import { readManifest } from '../../src/results/manifest';
import { FAST_POLL, testEnv, waitForProgress, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

describe('prompts that end unheard', () => {
  it('a terminated prompt is recorded as workflow_failed, and endedPrompts finds it with its row', async () => {
    env = await testEnv({ jobSeconds: 120 });
    await env.startWorker();
    const csv = join(env.dir, 'e.csv');
    const rows = await writeVbenchCsv(csv, 3, 'all_dimension', 700);
    const { handle, batchId } = await startBatch(env.session, csv, {
      concurrency: 3,
      poll: FAST_POLL,
      outDir: join(env.dir, 'out'),
    });
    await waitForProgress(handle, (p) => p.inFlight === 3 && env!.sim.stats().jobsCreated === 3);
    const rowIds = rows.map((r) => r[0]!);
    const gone = rowIds[1]!;
    await env.client.workflow.getHandle(promptWorkflowId(batchId, gone)).terminate('by hand, for the test');

    const activities = createPromptActivities();
    const ended: PromptResult[] = await new MockActivityEnvironment(undefined, { client: env.client }).run(
      (input: EndedPromptsInput) => activities.endedPrompts(input),
      { batchId, rowIds },
    );
    expect(ended).toHaveLength(1);
    expect(ended[0]).toMatchObject({
      rowId: gone,
      prompt: rows[1]![1],
      status: 'failed',
      errorCode: WORKFLOW_FAILED_CODE,
      errorMessage: 'its prompt workflow was terminated',
    });

    // The run that started it heard of it too; the two others are cancelled with their jobs.
    await waitForProgress(handle, (p) => p.failed === 1 && p.inFlight === 2);
    await handle.cancel();
    await expect(handle.result()).rejects.toThrow();
    const manifest = await readManifest(join(env.dir, 'out', batchId, 'manifest.jsonl'));
    expect(manifest.map((r) => [r.rowId, r.errorCode]).sort()).toEqual(
      rowIds.map((id) => [id, id === gone ? WORKFLOW_FAILED_CODE : 'cancelled']).sort(),
    );
    expect(manifest.filter((r) => r.errorCode === 'cancelled').every((r) => r.jobId)).toBe(true);
    expect(await readFile(join(env.dir, 'out', batchId, 'manifest.jsonl'), 'utf8')).not.toContain(
      'undefined',
    );
  }, 120_000);
});
