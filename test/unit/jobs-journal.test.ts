import { appendFile, mkdtemp, readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Client } from '@temporalio/client';
import type { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createJobActivities, type SubmitInput } from '../../src/activities/jobs';
import type { SubmitResult } from '../../src/contract/jobs';
import { GatewayClient } from '../../src/gateway/client';
import { appendJournal, journalPath, readJournal } from '../../src/results/jobs-journal';

const at = '2030-01-01T00:00:00.000Z';

describe('jobs journal', () => {
  it('appends entries as JSON lines under <outDir>/jobs.jsonl and reads them back in order', async () => {
    const dir = join(await mkdtemp(join(tmpdir(), 'vidbatch-journal-')), 'batch-x');
    expect(await readJournal(dir)).toEqual([]);
    await appendJournal(dir, { rowId: 'r1', jobId: 'vid_1', generation: 0, at });
    await appendJournal(dir, { rowId: 'r2', unknown: true, generation: 0, at });
    expect(journalPath(dir)).toBe(join(dir, 'jobs.jsonl'));
    expect(await readJournal(dir)).toEqual([
      { rowId: 'r1', jobId: 'vid_1', generation: 0, at },
      { rowId: 'r2', unknown: true, generation: 0, at },
    ]);
  });

  it('keeps every entry of concurrent appends, each on its own line', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-journal-'));
    await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        appendJournal(dir, { rowId: `r${i}`, jobId: `vid_${i}`, generation: 0, at }),
      ),
    );
    const entries = await readJournal(dir);
    expect(new Set(entries.map((e) => e.jobId)).size).toBe(200);
    expect((await readFile(journalPath(dir), 'utf8')).split('\n').filter(Boolean)).toHaveLength(200);
  });

  it('skips a torn last line and starts the next entry on a fresh line', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-journal-'));
    await appendJournal(dir, { rowId: 'r1', jobId: 'vid_1', generation: 0, at });
    await appendFile(journalPath(dir), '{"rowId":"r2","jobId":"vid_'); // crash mid-write
    expect((await readJournal(dir)).map((e) => e.rowId)).toEqual(['r1']);
    await appendJournal(dir, { rowId: 'r3', jobId: 'vid_3', generation: 1, at });
    expect((await readJournal(dir)).map((e) => e.rowId)).toEqual(['r1', 'r3']);
  });

  it('a resend after an unknown outcome takes the job the journal holds for its key, and sends nothing', async () => {
    const out = await mkdtemp(join(tmpdir(), 'vidbatch-journal-'));
    const dir = join(out, 'batch-x');
    await appendJournal(dir, { rowId: 'r1', unknown: true, generation: 0, at });
    await appendJournal(dir, { rowId: 'r1', jobId: 'vid_1', generation: 0, at });
    await appendJournal(dir, { rowId: 'r1', jobId: 'vid_other_key', generation: 1, at });
    // Nothing listens on port 9: a POST would fail.
    const gateway = new GatewayClient({
      baseUrl: 'http://127.0.0.1:9/v1',
      apiKey: () => 'sk-x',
      timeoutMs: 500,
    });
    const activities = createJobActivities(gateway, out);
    const submitJob = (input: Parameters<typeof activities.submitJob>[0]) => activities.submitJob(input);
    const row = { id: 'r1', line: 2, prompt: 'p', model: 'm', input: { prompt: 'p' }, parameters: {} };
    const env = new MockActivityEnvironment();
    const found = await env.run<[SubmitInput], SubmitResult, typeof submitJob>(submitJob, {
      batchId: 'batch-x',
      row,
      afterUnknown: true,
    });
    expect(found.jobId).toBe('vid_1');
    const other = await env
      .run(submitJob, { batchId: 'batch-x', row: { ...row, id: 'r2' }, afterUnknown: true })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(other).toBeInstanceOf(Error); // no job in the journal: it went on to send (and could not)
  });

  it('a retry of an attempt that died after the answer takes the job from its heartbeat, and journals it', async () => {
    const out = await mkdtemp(join(tmpdir(), 'vidbatch-journal-'));
    // Nothing listens on port 9: a POST would fail, and no journal exists to read.
    const gateway = new GatewayClient({
      baseUrl: 'http://127.0.0.1:9/v1',
      apiKey: () => 'sk-x',
      timeoutMs: 500,
    });
    const activities = createJobActivities(gateway, out);
    const submitJob = (input: SubmitInput) => activities.submitJob(input);
    const row = { id: 'r1', line: 2, prompt: 'p', model: 'm', input: { prompt: 'p' }, parameters: {} };
    const env = new MockActivityEnvironment({
      attempt: 2,
      heartbeatDetails: { sending: true, jobId: 'vid_hb' },
    });
    const found = await env.run<[SubmitInput], SubmitResult, typeof submitJob>(submitJob, {
      batchId: 'batch-x',
      row,
    });
    expect(found.jobId).toBe('vid_hb');
    expect(found.journalError).toBeUndefined();
    expect(await readJournal(join(out, 'batch-x'))).toMatchObject([
      { rowId: 'r1', jobId: 'vid_hb', generation: 0 },
    ]);
    // Without the job id, the same heartbeat means the outcome is unknown: flagged, not sent again.
    const unknown = await new MockActivityEnvironment({ attempt: 2, heartbeatDetails: { sending: true } })
      .run(submitJob, { batchId: 'batch-x', row: { ...row, id: 'r2' } })
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(unknown?.message).toMatch(/ended while sending/);
  });

  it('a 409 to a submit is journalled as an unknown outcome and handed to the workflow as one', async () => {
    const out = await mkdtemp(join(tmpdir(), 'vidbatch-journal-'));
    let posts = 0;
    const server = createServer((_req, res) => {
      posts += 1;
      res.writeHead(409, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'conflict', message: 'this key is in progress' } }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as AddressInfo;
      const gateway = new GatewayClient({
        baseUrl: `http://127.0.0.1:${port}/v1`,
        apiKey: () => 'sk-x',
        timeoutMs: 1000,
      });
      const activities = createJobActivities(gateway, out);
      const submitJob = (input: SubmitInput) => activities.submitJob(input);
      const row = { id: 'r1', line: 2, prompt: 'p', model: 'm', input: { prompt: 'p' }, parameters: {} };
      // The `sending` heartbeat recorded before the POST goes to this stand-in for the Temporal server.
      const client = {
        workflowService: { recordActivityTaskHeartbeat: () => Promise.resolve({}) },
        options: { identity: 'test' },
        withAbortSignal: <R>(_signal: AbortSignal, fn: () => R) => fn(),
      } as unknown as Client;
      const failure = await new MockActivityEnvironment({}, { client })
        .run(submitJob, { batchId: 'batch-x', row })
        .then(
          () => undefined,
          (e: unknown) => e as ApplicationFailure,
        );
      expect(posts).toBe(1);
      expect(failure).toMatchObject({ type: 'SubmitUnknown', nonRetryable: true });
      expect(failure?.message).toMatch(/409 this key is in progress/);
      expect(await readJournal(join(out, 'batch-x'))).toMatchObject([
        { rowId: 'r1', unknown: true, generation: 0 },
      ]);
    } finally {
      server.close();
    }
  });
});
