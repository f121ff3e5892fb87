// An adapter written outside vidbatch runs a batch: a toy dialect this test serves itself over real HTTP
// (`POST /make` answers a ticket, `GET /ticket/<id>` its state and video), an adapter for it written against
// the package's public entry only, and a batch run through the library API (a worker given the adapter, a
// batch started and followed). Every row succeeds with its video on disk, one job per row, and the rows the
// CSV leaves without a model or duration get the adapter's own defaults.
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { afterEach, describe, expect, inject, it } from 'vitest';
import {
  canonicalStatus,
  createWorker,
  CsvValidationError,
  gatewayTarget,
  loadCsv,
  startBatch,
  type ProviderAdapter,
  type PromptResult,
  type Session,
} from '../../src/index';
import { FAST_POLL, workflowBundle } from './helpers';

const KEY = 'toy-secret';
/** Real clips of each resolution and length (the simulator's), so the downloaded videos verify. */
const clip = (resolution: string, seconds: number) =>
  readFileSync(new URL(`../../src/simulator/clips/${resolution}-${seconds}s.mp4`, import.meta.url));

interface Ticket {
  model: string;
  text: string;
  seconds: number;
  height: string;
  polls: number;
}

/** The toy dialect: a ticket per make, `waiting`, then `processing`, then `done` with its video's URL. */
async function toyServer() {
  const tickets = new Map<string, Ticket>();
  const server: Server = createServer((req, res) => {
    const answer = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const path = new URL(req.url ?? '/', 'http://toy').pathname;
    const file = /^\/files\/(t-\d+)\.mp4$/.exec(path);
    if (req.method === 'GET' && file) {
      const t = tickets.get(file[1]!);
      if (!t) return answer(404, { message: 'no such file' });
      res.writeHead(200, { 'content-type': 'video/mp4' });
      return res.end(clip(t.height, t.seconds));
    }
    if (req.headers['x-toy-key'] !== KEY) return answer(401, { message: 'bad key' });
    if (req.method === 'POST' && path === '/make') {
      let text = '';
      req.on('data', (d: Buffer) => (text += d.toString()));
      req.on('end', () => {
        const body = JSON.parse(text) as Omit<Ticket, 'polls'>;
        const id = `t-${tickets.size + 1}`;
        tickets.set(id, { ...body, polls: 0 });
        answer(200, { ticket: id });
      });
      return;
    }
    const ticket = /^\/ticket\/(t-\d+)$/.exec(path);
    if (req.method === 'GET' && ticket) {
      const t = tickets.get(ticket[1]!);
      if (!t) return answer(404, { message: 'no such ticket' });
      t.polls++;
      const state = t.polls === 1 ? 'waiting' : t.polls === 2 ? 'processing' : 'done';
      const { port } = server.address() as AddressInfo;
      return answer(200, {
        ticket: ticket[1],
        state,
        ...(state === 'done' ? { video: `http://127.0.0.1:${port}/files/${ticket[1]}.mp4` } : {}),
      });
    }
    answer(404, { message: 'not found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    tickets,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The adapter, as a user of the package writes it. */
const toy: ProviderAdapter = {
  name: 'toy',
  defaultModel: 'toy-video-1',
  defaults: { resolution: '720P', duration: 3 },
  exampleBaseUrl: 'http://127.0.0.1:8080',
  checkBaseUrl: (url) => (/^http:\/\/[^/]+$/.test(url) ? undefined : 'must be http://host:port'),
  authorization: (key) => ({ 'x-toy-key': key }),
  submit: ({ model, input, parameters }) => ({
    method: 'POST',
    path: '/make',
    body: { model, text: input.prompt, seconds: parameters?.duration, height: parameters?.resolution },
  }),
  check: (id) => ({ method: 'GET', path: `/ticket/${encodeURIComponent(id)}` }),
  readJob: (json) => {
    const t = json as { ticket?: unknown; state?: unknown; video?: unknown };
    if (typeof t.ticket !== 'string') return { problem: 'an answer without a ticket' };
    // A make answers the ticket alone: it waits.
    const state = typeof t.state === 'string' ? t.state : 'waiting';
    return {
      id: t.ticket,
      status: canonicalStatus(state),
      rawStatus: state,
      ...(typeof t.video === 'string' ? { url: t.video } : {}),
    };
  },
  readError: (json) => {
    const e = json as { message?: unknown };
    return typeof e?.message === 'string' ? { message: e.message } : undefined;
  },
  videoNeedsKey: false,
  validate: ({ parameters }) =>
    [3, 6].includes(Number(parameters?.duration))
      ? undefined
      : `duration ${String(parameters?.duration)} is not one toy takes: 3 or 6 seconds`,
};

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

describe('an adapter written against the public interface', () => {
  it('runs a batch: every row succeeds with its video on disk, one job per row, the adapter`s defaults', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-custom-provider-'));
    const api = await toyServer();
    cleanups.push(api.close);
    const address = inject('temporalAddress');
    const connection = await Connection.connect({ address });
    cleanups.push(() => connection.close());
    const taskQueue = `custom-${randomUUID()}`;
    const target = gatewayTarget(api.baseUrl, undefined, toy.name);

    const nativeConnection = await NativeConnection.connect({ address });
    cleanups.push(() => nativeConnection.close());
    const worker: Worker = await createWorker({
      connection: nativeConnection,
      namespace: 'default',
      taskQueue,
      gateway: { baseUrl: api.baseUrl, provider: toy, target, apiKey: () => KEY, timeoutMs: 5000 },
      outRoot: join(dir, 'out'),
      workflowBundle: await workflowBundle(),
    });
    const running = worker.run();
    cleanups.push(async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
    });
    const session: Session = {
      client: new Client({ connection }),
      taskQueue,
      namespace: 'default',
      target,
      provider: toy,
      close: async () => {},
    };

    // A value the adapter cannot take is a problem of the file, named with its line and column, before any job.
    const tag = randomUUID().slice(0, 8);
    await writeFile(join(dir, 'bad.csv'), `prompt,duration\nan owl ${tag},5\n`);
    const bad = await loadCsv(join(dir, 'bad.csv'), { provider: toy });
    expect(bad.problems).toEqual([
      expect.objectContaining({
        line: 2,
        column: 'duration',
        reason: 'toy: duration 5 is not one toy takes: 3 or 6 seconds',
      }),
    ]);
    await expect(startBatch(session, join(dir, 'bad.csv'))).rejects.toBeInstanceOf(CsvValidationError);
    expect(api.tickets.size).toBe(0);

    const csv = join(dir, 'rows.csv');
    await writeFile(
      csv,
      [
        'id,prompt,model,duration',
        `r1,a lake at dawn ${tag},,`,
        `r2,a paper boat ${tag},,6`,
        `r3,a red fox ${tag},toy-video-2,`,
        `r4,a night city ${tag},,3`,
      ].join('\n') + '\n',
    );
    const { handle, target: ran } = await startBatch(session, csv, {
      concurrency: 2,
      poll: FAST_POLL,
      outDir: join(dir, 'out'),
    });
    expect(ran.target).toBe(`toy+${api.baseUrl}`);
    const result = await handle.result();
    expect(result).toMatchObject({ total: 4, succeeded: 4, failed: 0 });

    // The manifest's final state of each row (its last line).
    const lines = (await readFile(result.manifestPath, 'utf8')).split('\n').filter(Boolean);
    const rows = new Map<string, PromptResult>();
    for (const line of lines) {
      const record = JSON.parse(line) as PromptResult;
      rows.set(record.rowId, record);
    }
    expect([...rows.keys()].sort()).toEqual(['r1', 'r2', 'r3', 'r4']);
    for (const row of rows.values()) {
      expect(row.status, row.rowId).toBe('succeeded');
      expect(row.jobId, row.rowId).toMatch(/^t-\d+$/);
      expect(existsSync(row.file!), row.rowId).toBe(true);
      expect(row.verification?.ok, row.rowId).toBe(true);
    }
    expect(
      [...rows.values()]
        .sort((a, b) => a.rowId.localeCompare(b.rowId))
        .map((r) => [r.model, r.parameters.duration]),
    ).toEqual([
      ['toy-video-1', 3],
      ['toy-video-1', 6],
      ['toy-video-2', 3],
      ['toy-video-1', 3],
    ]);

    // Exactly one job per row, each made with what the manifest says was sent.
    expect(api.tickets.size).toBe(4);
    const made = [...api.tickets.values()].map((t) => `${t.text}|${t.model}|${t.seconds}|${t.height}`);
    expect(made.sort()).toEqual(
      [...rows.values()].map((r) => `${r.prompt}|${r.model}|${String(r.parameters.duration)}|720P`).sort(),
    );
    expect(new Set([...rows.values()].map((r) => r.jobId)).size).toBe(4);
  });
});
