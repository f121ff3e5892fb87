import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { SEARCH_ATTRIBUTES } from '../../src/contract/search-attributes';
import { startDevServer } from '../../src/dev-server/dev-server';

async function customSearchAttributes(address: string): Promise<Record<string, unknown>> {
  const connection = await Connection.connect({ address });
  try {
    const res = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
    return res.customAttributes ?? {};
  } finally {
    await connection.close();
  }
}

describe('the provisioned Temporal dev server', () => {
  const address = inject('temporalAddress');

  it('serves the Web UI', async () => {
    const response = await fetch(inject('temporalUiUrl'));
    expect(response.status).toBe(200);
    expect(await response.text()).toMatch(/<html/i);
  });

  it('has the vidbatch search attributes registered', async () => {
    const attrs = await customSearchAttributes(address);
    for (const { name } of SEARCH_ATTRIBUTES) expect(attrs).toHaveProperty(name);
  });

  it('runs a workflow end to end', async () => {
    const connection = await NativeConnection.connect({ address });
    const taskQueue = `hello-${Date.now()}`;
    const worker = await Worker.create({
      connection,
      taskQueue,
      workflowsPath: fileURLToPath(new URL('../fixtures/hello-workflow.ts', import.meta.url)),
    });
    const client = new Client({ connection: await Connection.connect({ address }) });
    const result: unknown = await worker.runUntil(
      client.workflow.execute('hello', { taskQueue, workflowId: taskQueue, args: ['vidbatch'] }),
    );
    expect(result).toBe('hello vidbatch');
    await client.connection.close();
    await connection.close();
  });

  it('gives task queues one partition, so a queue rate limit is exact (docs/rate-budget.md)', async () => {
    const connection = await Connection.connect({ address });
    try {
      const partitions = await connection.workflowService.listTaskQueuePartitions({
        namespace: 'default',
        taskQueue: { name: `partitions-${Date.now()}` },
      });
      expect(partitions.activityTaskQueuePartitions).toHaveLength(1);
      expect(partitions.workflowTaskQueuePartitions).toHaveLength(1);
    } finally {
      await connection.close();
    }
  });
});

describe('startDevServer with a persistent db file', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('keeps workflows across a restart and re-registers search attributes', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-db-'));
    dirs.push(dir);
    const dbFile = join(dir, 'temporal.db');
    const first = await startDevServer({ dbFile, headless: true, log: () => {} });
    const client = new Client({ connection: await Connection.connect({ address: first.address }) });
    await client.workflow.start('neverRuns', { taskQueue: 'nobody', workflowId: 'survives-restart' });
    await client.connection.close();
    await first.stop();
    expect(first.process.exitCode !== null || first.process.signalCode !== null).toBe(true);

    const second = await startDevServer({ dbFile, headless: true, log: () => {} });
    try {
      expect(second.address).not.toBe(first.address);
      const again = new Client({ connection: await Connection.connect({ address: second.address }) });
      const description = await again.workflow.getHandle('survives-restart').describe();
      expect(description.status.name).toBe('RUNNING');
      await again.connection.close();
      const attrs = await customSearchAttributes(second.address);
      for (const { name } of SEARCH_ATTRIBUTES) expect(attrs).toHaveProperty(name);
    } finally {
      await second.stop();
    }
  });
});
