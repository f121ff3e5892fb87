// The Temporal Web UI of the self-hosted stack (scripts/cluster.sh runs the UI server of compose's
// temporalio/ui version), in a real headless browser: a batch run on the cluster is there with its progress
// and the rate-budget learner's page, as the README's "Watching in the Temporal Web UI" says. Runs when
// VIDBATCH_CLUSTER_UI is set (.ci/run sets it after `scripts/cluster.sh up`) and Chromium is there.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { writeVbenchCsv } from '../../bench/vbench';
import { gatewayQueue, rateBudgetWorkflowId } from '../../src/contract/rate-budget';
import { vidbatch } from '../integration/cli-helpers';
import { IN_CI, requireChromium } from '../requirements';

const ADDRESS = process.env.VIDBATCH_CLUSTER_ADDRESS;
const UI = process.env.VIDBATCH_CLUSTER_UI;
// Only with the cluster's UI up: without a cluster, cluster.test.ts already said how to start one.
const CHROMIUM = ADDRESS && UI ? requireChromium() : undefined;

if (ADDRESS && !UI && IN_CI)
  describe('the cluster Web UI in CI', () => {
    it('is up', () => {
      throw new Error('VIDBATCH_CLUSTER_UI is not set: scripts/cluster.sh up did not start the Web UI');
    });
  });

let browser: Browser | undefined;
afterAll(async () => {
  await browser?.close();
});

describe.skipIf(!ADDRESS || !UI || !CHROMIUM)('the Temporal Web UI of the cluster', () => {
  it('shows a batch run on the cluster, and the rate-budget learner', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-ui-'));
    const taskQueue = `ui-${Date.now().toString(36)}`;
    const env = { TEMPORAL_ADDRESS: ADDRESS!, VIDBATCH_TASK_QUEUE: taskQueue };
    await writeVbenchCsv(join(dir, 'p.csv'), 6, 'all_dimension', Date.now() % 1_000_000_000);
    // `run --simulate`: the simulator and a worker in this process, the batch on the cluster.
    const run = await vidbatch(['run', 'p.csv', '--simulate'], { cwd: dir, env });
    expect(run.code, run.stderr).toBe(0);
    const batch = /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(run.stdout + run.stderr)![1]!;

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const page = await browser.newPage();
    await page.goto(`${UI}/namespaces/default/workflows/${batch}`);
    await page.getByText(batch).first().waitFor({ timeout: 60_000 });
    await page
      .getByText(/Completed/i)
      .first()
      .waitFor({ timeout: 60_000 });

    // The learner's page is there and running (UI 2.42.1 does not render a workflow's current details on
    // the page; `vidbatch status` shows the limit and the shares, test/integration/cli-rate-budget.test.ts).
    // `--simulate` runs on a queue of its own under VIDBATCH_TASK_QUEUE: the batch's description names it.
    const connection = await Connection.connect({ address: ADDRESS! });
    const described = await new Client({ connection }).workflow.getHandle(batch).describe();
    await connection.close();
    expect(described.taskQueue.startsWith(`${taskQueue}@`)).toBe(true);
    const learner = rateBudgetWorkflowId(gatewayQueue(described.taskQueue));
    await page.goto(`${UI}/namespaces/default/workflows/${encodeURIComponent(learner)}`);
    await page.getByText(learner).first().waitFor({ timeout: 60_000 });
    await page
      .getByText(/Running/i)
      .first()
      .waitFor({ timeout: 60_000 });
  }, 240_000);
});
