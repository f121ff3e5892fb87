// Notices (`run --notify`), end to end: spawned `vidbatch worker`s and `vidbatch run` against this test's
// Temporal server and simulator, and a local receiver that verifies every delivery with the `standardwebhooks`
// package itself. One notice per event, the same webhook-id on every attempt, delivered once across a worker's
// death; a pause for a refused key told once, naming `resume`; a Slack URL gets the readable text.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import type { Client } from '@temporalio/client';
import type { Notice } from '../../src/contract/notice';
import { background, vidbatch } from './cli-helpers';
import { cliSettings, testEnv, type TestEnv } from './helpers';

// A Standard Webhooks secret (whsec_ and base64), as a receiver's settings page gives one.
const SECRET = `whsec_${Buffer.from('vidbatch notice test secret 0123').toString('base64')}`;
const FAST = ['--first-poll', '0.3', '--poll-interval', '0.2', '--poll-cap', '1', '--no-adaptive-poll'];

interface Delivery {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The signature checked out (signed receivers only). */
  verified: boolean;
}

/** A signed receiver's path: `/hook`, or one with a secret in it (`/hook/<key>`). */
const isHook = (path: string | undefined) => path === '/hook' || !!path?.startsWith('/hook/');

/** A receiver: `/hook` (and `/hook/...`) verifies signatures and refuses each notice's first `refuse` deliveries; `/slack` takes text. */
async function receiver(refuse: number) {
  const deliveries: Delivery[] = [];
  const seen = new Map<string, number>();
  const listeners: ((d: Delivery) => void)[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      let verified = false;
      if (isHook(req.url)) {
        try {
          new Webhook(SECRET).verify(body, req.headers as Record<string, string>);
          verified = true;
        } catch {
          verified = false;
        }
      }
      const d: Delivery = { path: req.url ?? '', headers: req.headers, body, verified };
      deliveries.push(d);
      for (const l of listeners) l(d);
      if (isHook(req.url) && !verified) return void res.writeHead(400).end('bad signature');
      const id = String(req.headers['webhook-id'] ?? req.url);
      const n = (seen.get(id) ?? 0) + 1;
      seen.set(id, n);
      res.writeHead(isHook(req.url) && n <= refuse ? 503 : 200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    deliveries,
    onDelivery: (l: (d: Delivery) => void) => listeners.push(l),
    async until(test: () => boolean, timeoutMs = 90_000) {
      const deadline = Date.now() + timeoutMs;
      while (!test()) {
        if (Date.now() > deadline)
          throw new Error(`receiver never saw it; got ${JSON.stringify(deliveries)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** The text of every history of each workflow whose id names `batchId` (its runs, prompts and notices), by id. */
async function historiesOf(client: Client, batchId: string): Promise<Map<string, string>> {
  const texts = new Map<string, string>();
  // Payloads are bytes (JSON inside): decoded, so a URL in any input, result, memo or summary is seen.
  const walk = (v: unknown, into: string[]): void => {
    if (typeof v === 'string') into.push(v);
    else if (v instanceof Uint8Array) into.push(Buffer.from(v).toString('utf8'));
    else if (Array.isArray(v)) for (const x of v) walk(x, into);
    else if (v && typeof v === 'object') for (const x of Object.values(v)) walk(x, into);
  };
  for await (const w of client.workflow.list()) {
    if (!w.workflowId.includes(batchId)) continue;
    const into = [texts.get(w.workflowId) ?? ''];
    walk(await client.workflow.getHandle(w.workflowId, w.runId).fetchHistory(), into);
    texts.set(w.workflowId, into.join('\n'));
  }
  return texts;
}

let env: TestEnv | undefined;
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await env?.close();
  env = undefined;
});

const notices = (ds: Delivery[], type?: string) =>
  ds.filter((d) => isHook(d.path) && d.verified && (!type || (JSON.parse(d.body) as Notice).type === type));

function workerIn(e: TestEnv, extra: Record<string, string> = {}) {
  const w = background(['worker'], {
    cwd: e.dir,
    env: {
      ...cliSettings(e),
      VIDBATCH_OUT_ROOT: join(e.dir, 'out'),
      VIDBATCH_NOTIFY_SECRET: SECRET,
      ...extra,
    },
  });
  cleanups.push(() => w.stop());
  return w;
}

describe('run --notify', () => {
  it('signs each notice, retries it with the same webhook-id, and delivers it once although a worker dies', async () => {
    env = await testEnv({ faults: { moderationWords: ['forbidden'] } });
    const e = env;
    const hooks = await receiver(2);
    cleanups.push(() => hooks.close());
    const first = workerIn(e);
    await first.waitFor(/vidbatch worker polling task queue/);
    // Between the first refusal and the retry (2 s later), the worker that delivered it goes away.
    let second: ReturnType<typeof workerIn> | undefined;
    hooks.onDelivery((d) => {
      if (d.path !== '/hook' || second) return;
      second = workerIn(e);
      void first.stop();
    });
    const csv = join(e.dir, 'notify.csv');
    await writeFile(csv, 'id,prompt\na,a lighthouse at dusk\nb,a forbidden scene\nc,a red kite over hills\n');
    const run = await vidbatch(['run', csv, '--notify', `${hooks.base}/hook`, ...FAST], {
      cwd: e.dir,
      env: cliSettings(e),
    });
    expect(run.stderr).toMatch(/Started batch (batch-\S+)/);
    const batchId = /Started batch (batch-\S+)/.exec(run.stderr)![1]!;
    expect(run.code).toBe(3); // one row refused for its content
    await hooks.until(() => notices(hooks.deliveries).length >= 3);
    // Let any extra delivery arrive before counting.
    await new Promise((r) => setTimeout(r, 3000));

    const completed = notices(hooks.deliveries);
    expect(completed).toHaveLength(3);
    const ids = new Set(completed.map((d) => d.headers['webhook-id']));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(new RegExp(`^notice/${batchId}/[0-9a-f]{8}-completed$`));
    const notice = JSON.parse(completed[2]!.body) as Notice;
    expect(notice).toMatchObject({
      type: 'batch.completed',
      data: {
        batchId,
        event: 'completed',
        counts: { total: 3, succeeded: 2, failed: 1 },
        failures: [{ code: 'content_moderation', rows: 1 }],
        next: `vidbatch retry-failed ${batchId} --code content_moderation`,
      },
    });
    expect(notice.data.target).toContain('127.0.0.1');
    expect(notice.data.spend).toMatchObject({ jobsMade: 3, kept: 2 });
    expect(notice.data.manifest).toMatch(/manifest\.jsonl$/);
    // The report page the notice points to was written when the batch ended.
    expect(await readFile(notice.data.report!, 'utf8')).toContain(batchId);
    // Every attempt's body is the same, and a body changed after signing fails verification.
    expect(new Set(completed.map((d) => d.body)).size).toBe(1);
    const tampered = completed[2]!.body.replace('"succeeded":2', '"succeeded":3');
    expect(() =>
      new Webhook(SECRET).verify(tampered, completed[2]!.headers as Record<string, string>),
    ).toThrow();
    // Neither the gateway key nor the secret is in a notice or in what the processes printed.
    for (const text of [completed[2]!.body, run.stdout, run.stderr, first.output(), second!.output()]) {
      expect(text).not.toContain(e.sim.apiKey);
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(SECRET.slice(6));
    }

    const status = await vidbatch(['status', batchId], { cwd: e.dir, env: cliSettings(e) });
    expect(status.stdout).toContain(`notice completed: delivered to ${hooks.base}/… (attempt 3)`);
  });

  it('tells a pause for a refused key once, naming resume; a Slack URL gets the readable message', async () => {
    env = await testEnv();
    const e = env;
    const hooks = await receiver(0);
    cleanups.push(() => hooks.close());
    const worker = workerIn(e, { GATEWAY_API_KEY: 'sk-not-a-key-the-gateway-knows' });
    await worker.waitFor(/vidbatch worker polling task queue/);
    const csv = join(e.dir, 'refused.csv');
    await writeFile(csv, 'id,prompt\na,a lighthouse at dusk\nb,a calm lake\nc,a red kite over hills\n');
    const run = await vidbatch(
      [
        'run',
        csv,
        '--detach',
        '--notify',
        `${hooks.base}/hook`,
        '--notify',
        `slack+${hooks.base}/slack`,
        ...FAST,
      ],
      { cwd: e.dir, env: cliSettings(e) },
    );
    expect(run.code).toBe(0);
    const batchId = /batch (batch-\S+)/.exec(run.stderr)![1]!;
    cleanups.push(() => vidbatch(['cancel', batchId], { cwd: e.dir, env: cliSettings(e) }));
    await hooks.until(() => notices(hooks.deliveries, 'batch.paused').length > 0);
    await hooks.until(() => hooks.deliveries.some((d) => d.path === '/slack'));
    // Every row is refused in turn: still one notice for the one pause.
    await new Promise((r) => setTimeout(r, 4000));
    const paused = notices(hooks.deliveries, 'batch.paused');
    expect(paused).toHaveLength(1);
    const notice = JSON.parse(paused[0]!.body) as Notice;
    expect(notice.data.reason).toMatch(/refused the API key/);
    expect(notice.data.next).toMatch(new RegExp(`^vidbatch resume ${batchId}`));
    expect(paused[0]!.headers['webhook-id']).toMatch(/-paused-1$/);
    const slack = hooks.deliveries.filter((d) => d.path === '/slack');
    expect(slack).toHaveLength(1);
    const { text } = JSON.parse(slack[0]!.body) as { text: string };
    expect(text.split('\n')).toEqual(
      expect.arrayContaining([
        `*vidbatch: batch paused* ${batchId}`,
        expect.stringMatching(/^why: the gateway refused the API key/),
        expect.stringMatching(new RegExp(`^next: vidbatch resume ${batchId}`)),
      ]),
    );
    expect(slack[0]!.headers['webhook-signature']).toBeUndefined();
    for (const d of hooks.deliveries) expect(d.body).not.toContain('sk-not-a-key-the-gateway-knows');
  });

  it('a notice that cannot go is a visible failure in status, and the batch ends anyway', async () => {
    env = await testEnv();
    const e = env;
    const hooks = await receiver(0);
    cleanups.push(() => hooks.close());
    // This worker has no webhook secret: a signed notice cannot be sent, and no later attempt changes that.
    const worker = workerIn(e, { VIDBATCH_NOTIFY_SECRET: '' });
    await worker.waitFor(/vidbatch worker polling task queue/);
    const csv = join(e.dir, 'unsigned.csv');
    await writeFile(csv, 'id,prompt\na,a lighthouse at dusk\n');
    const run = await vidbatch(['run', csv, '--notify', `${hooks.base}/hook`, '--json', ...FAST], {
      cwd: e.dir,
      env: cliSettings(e),
    });
    expect(run.code).toBe(0);
    const { batchId } = JSON.parse(run.stdout) as { batchId: string };
    let status = '';
    for (let i = 0; i < 100 && !/NOT delivered/.test(status); i++) {
      status = (await vidbatch(['status', batchId], { cwd: e.dir, env: cliSettings(e) })).stdout;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toContain(
      `notice completed: NOT delivered to ${hooks.base}/… after 1 attempt: no webhook secret on this worker`,
    );
    expect(hooks.deliveries).toHaveLength(0);
  });

  it('keeps notice URLs out of every history, and a re-run without --notify still tells them', async () => {
    env = await testEnv();
    const e = env;
    const hooks = await receiver(0);
    cleanups.push(() => hooks.close());
    // A Slack incoming webhook's path is its key; a signed receiver's may be a secret too.
    const key = 'T0SECRET/B0SECRET/xoxSecretPathKey0123456789';
    const urls = [`${hooks.base}/hook/${key}`, `slack+${hooks.base}/slack/${key}`];
    // A key the gateway refuses: the batch pauses (told), is cancelled, and is run again by a worker with a good one.
    const refused = workerIn(e, { GATEWAY_API_KEY: 'sk-not-a-key-the-gateway-knows' });
    await refused.waitFor(/vidbatch worker polling task queue/);
    const csv = join(e.dir, 'secret.csv');
    await writeFile(csv, 'id,prompt\na,a lighthouse at dusk\nb,a calm lake\n');
    const first = await vidbatch(['run', csv, '--detach', ...FAST], {
      cwd: e.dir,
      env: { ...cliSettings(e), VIDBATCH_NOTIFY: urls.join(' ') },
    });
    expect(first.code).toBe(0);
    const batchId = /batch (batch-\S+)/.exec(first.stderr)![1]!;
    await hooks.until(() => notices(hooks.deliveries, 'batch.paused').length > 0);
    expect((await vidbatch(['cancel', batchId], { cwd: e.dir, env: cliSettings(e) })).code).toBe(0);
    await refused.stop();
    const good = workerIn(e);
    await good.waitFor(/vidbatch worker polling task queue/);
    const again = await vidbatch(['run', csv, ...FAST], { cwd: e.dir, env: cliSettings(e) });
    expect(again.code).toBe(0);
    await hooks.until(() => notices(hooks.deliveries, 'batch.completed').length > 0);
    await hooks.until(
      () =>
        hooks.deliveries.filter((d) => d.path === `/slack/${key}` && d.body.includes('completed')).length > 0,
    );
    // Each went to its whole URL, path and all.
    expect(notices(hooks.deliveries).every((d) => d.path === `/hook/${key}`)).toBe(true);

    const histories = await historiesOf(e.client, batchId);
    const ids = [...histories.keys()];
    expect(ids).toEqual(expect.arrayContaining([batchId, `${batchId}/a`, `${batchId}/b`]));
    // The pause, the cancel and the re-run's end: each a notice workflow of its own.
    expect(ids.filter((id) => id.startsWith(`notice/${batchId}/`))).toHaveLength(3);
    expect(histories.get(batchId)).toContain(`${hooks.base}/…`);
    const secret = key.split('/').at(-1)!;
    expect(ids.filter((id) => histories.get(id)!.includes(secret))).toEqual([]);
    for (const out of [
      first.stderr,
      first.stdout,
      again.stderr,
      again.stdout,
      refused.output(),
      good.output(),
    ])
      expect(out).not.toContain(secret);
    const status = await vidbatch(['status', batchId], { cwd: e.dir, env: cliSettings(e) });
    expect(status.stdout).toContain(`notice completed: delivered to ${hooks.base}/…`);
    expect(status.stdout).not.toContain(secret);
    // Where they are kept instead: beside the rows file, readable by their owner only.
    const kept = join(e.dir, 'out', '.notify');
    const files = await readdir(kept);
    expect(files).toHaveLength(2);
    for (const f of files) expect((await stat(join(kept, f))).mode & 0o077).toBe(0);
  });
});
