// The simulator's Replicate dialect (src/simulator/replicate-routes.ts), over real HTTP: what Replicate's HTTP
// reference says its answers are, and that the Model Gateway's keys, limits and faults apply to it too.
import { describe, expect, it } from 'vitest';
import { looksLikeMp4 } from '../../src/results/download';
import type { Simulator } from '../../src/simulator/server';
import { callSimulator, simulators, type CallInit } from './simulator-test-helpers';

const sim = simulators({ jobSeconds: 0.3 });

const MODEL = 'bytedance/seedance-1-lite';
const CREATE = `models/${MODEL}/predictions`;

/** A request to an absolute URL the simulator gave, or to a path below /replicate/v1/. */
const call = (s: Simulator, path: string, init: CallInit = {}) =>
  callSimulator(s, path.startsWith('http') ? path : `${s.origin}/replicate/v1/${path}`, init);

interface Prediction {
  id: string;
  status: string;
  output: string | null;
  error: string | null;
  data_removed: boolean;
  urls: { get: string; cancel: string };
}

async function create(
  s: Simulator,
  input: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Promise<Prediction> {
  const res = await call(s, CREATE, {
    body: { input: { prompt: 'a red fox in the snow', ...input } },
    headers,
  });
  expect(res.status).toBe(201);
  return (await res.json()) as Prediction;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function untilFinished(s: Simulator, p: Prediction): Promise<Prediction> {
  for (let i = 0; i < 100; i++) {
    const res = await call(s, p.urls.get);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Prediction;
    if (!['starting', 'processing'].includes(body.status)) return body;
    await sleep(50);
  }
  throw new Error('never finished');
}

describe('simulator, Replicate: a prediction from create to video', () => {
  it('creates (201, starting), goes processing, succeeds with one output URL, and serves the video', async () => {
    const s = await sim();
    const p = await create(s, { resolution: '480p', duration: 5 });
    expect(p).toMatchObject({ status: 'starting', output: null, error: null, data_removed: false });
    const base = `${s.origin}/replicate/v1/predictions/${p.id}`;
    expect(p.urls).toEqual({ get: base, cancel: `${base}/cancel` });
    const done = await untilFinished(s, p);
    expect(done.status).toBe('succeeded');
    expect(typeof done.output).toBe('string');
    const bytes = Buffer.from(await (await fetch(done.output!)).arrayBuffer());
    expect(looksLikeMp4(bytes)).toBe(true);
    const stats = s.stats();
    expect(stats.jobsCreated).toBe(1);
    expect(stats.completedJobsNeverDelivered).toBe(0);
    expect(stats.requests['POST /replicate/v1/models/{owner}/{name}/predictions']).toEqual({ 201: 1 });
  });

  it('creates by `version` on POST /predictions, and holds the answer with `Prefer: wait`', async () => {
    const s = await sim();
    const res = await call(s, 'predictions', {
      body: { version: `${MODEL}:abc123`, input: { prompt: 'x' } },
      headers: { prefer: 'wait=5' },
    });
    expect(res.status).toBe(201);
    expect(((await res.json()) as Prediction).status).toBe('succeeded');
  });

  it('refuses an input the model cannot take with 422 and invalid_fields, making no prediction', async () => {
    const s = await sim();
    const res = await call(s, CREATE, { body: { input: { prompt: 'x', duration: 20, resolution: '4k' } } });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { title: string; status: number; invalid_fields: { field: string }[] };
    expect(body).toMatchObject({ title: 'Input validation failed', status: 422 });
    expect(body.invalid_fields.map((f) => f.field)).toEqual(['input.resolution', 'input.duration']);
    expect(
      (await call(s, 'models/nobody/nothing/predictions', { body: { input: { prompt: 'x' } } })).status,
    ).toBe(404);
    expect(s.stats().jobsCreated).toBe(0);
  });

  it('fails a refused prompt with an `error` string', async () => {
    const s = await sim({ faults: { moderationWords: ['forbidden'] } });
    const done = await untilFinished(s, await create(s, { prompt: 'a forbidden scene' }));
    expect(done.status).toBe('failed');
    expect(done.error).toMatch(/moderation/);
    expect(done.output).toBeNull();
  });
});

describe('simulator, Replicate: cancel and deadlines', () => {
  it('cancels a running prediction; a finished one is answered as it is', async () => {
    const s = await sim({ jobSeconds: 30 });
    const p = await create(s);
    const res = await call(s, p.urls.cancel, { method: 'POST' });
    expect(res.status).toBe(200);
    expect(((await res.json()) as Prediction).status).toBe('canceled');
    expect((await untilFinished(s, p)).status).toBe('canceled');
    s.setOptions({ jobSeconds: 0.1 });
    const quick = await untilFinished(s, await create(s));
    expect(((await (await call(s, quick.urls.cancel, { method: 'POST' })).json()) as Prediction).status).toBe(
      'succeeded',
    );
  });

  it('aborts at a Cancel-After deadline before it starts, cancels at one after', async () => {
    const s = await sim({ jobSeconds: 2 });
    const aborted = await create(s, {}, { 'cancel-after': '10ms' });
    const canceled = await create(s, {}, { 'cancel-after': '500ms' });
    await sleep(700);
    expect((await untilFinished(s, aborted)).status).toBe('aborted');
    expect((await untilFinished(s, canceled)).status).toBe('canceled');
    expect(
      (await call(s, CREATE, { body: { input: { prompt: 'x' } }, headers: { 'cancel-after': 'soon' } }))
        .status,
    ).toBe(400);
  });
});

describe('simulator, Replicate: keys, limits and faults', () => {
  it('refuses a missing or unknown token with 401 in Replicate`s problem shape', async () => {
    const s = await sim();
    for (const key of [null, 'sk-not-a-key']) {
      const res = await call(s, CREATE, { key, body: { input: { prompt: 'x' } } });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({
        title: 'Unauthenticated',
        detail: 'You did not pass a valid authentication token',
        status: 401,
      });
    }
    expect(s.stats().requestsWithoutKey).toBe(1);
  });

  it('throttles with 429, Retry-After and the `resets in ~Ns` detail; the running-jobs cap too', async () => {
    const s = await sim({ rateLimit: 1, burst: 1 });
    await create(s);
    const limited = await call(s, CREATE, { body: { input: { prompt: 'x' } } });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(((await limited.json()) as { detail: string }).detail).toMatch(
      /^Request was throttled\. Your rate limit resets in ~\d+s\.$/,
    );
    await sleep(400); // the first job has finished: it holds no running slot
    s.setOptions({ rateLimit: 0, maxRunningJobs: 1, jobSeconds: 30 });
    await create(s);
    expect((await call(s, CREATE, { body: { input: { prompt: 'x' } } })).status).toBe(429);
    expect(s.stats().jobsCreated).toBe(2);
  });

  it('loses a create answer after the prediction was made (a 502), counted as an ambiguous submit', async () => {
    const s = await sim({ faults: { error502After: 1, scope: 'submit' } });
    expect((await call(s, CREATE, { body: { input: { prompt: 'x' } } })).status).toBe(502);
    expect(s.stats()).toMatchObject({ jobsCreated: 1, ambiguousSubmits: { error502After: 1 } });
  });

  it('removes a prediction`s data after jobTtlSeconds (data_removed), and expires and redirects its URL', async () => {
    const s = await sim({ jobTtlSeconds: 0.6, urlTtlSeconds: 0.2, redirectResults: 1 });
    const done = await untilFinished(s, await create(s));
    expect((await fetch(done.output!, { redirect: 'manual' })).status).toBe(302);
    await sleep(300);
    expect((await fetch(done.output!)).status).toBe(403);
    await sleep(500);
    const removed = (await (await call(s, done.urls.get)).json()) as Prediction;
    expect(removed).toMatchObject({ status: 'succeeded', data_removed: true, output: null });
    expect(s.stats().goneQueries).toBe(1);
  });

  it('answers 404 for a prediction of another dialect or a forgotten one, 500 for one that errors', async () => {
    const s = await sim({ faults: { goneWords: ['lost'] } });
    const gateway = await fetch(`${s.origin}/v1/videos/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'modelfamily-1.0-r2v', input: { prompt: 'x' } }),
    });
    const { id } = (await gateway.json()) as { id: string };
    expect((await call(s, `predictions/${id}`)).status).toBe(404);
    expect((await call(s, (await create(s, { prompt: 'a lost fox' })).urls.get)).status).toBe(404);
    s.setFaults({ jobError5xx: 1 });
    expect((await call(s, (await create(s)).urls.get)).status).toBe(500);
  });
});
