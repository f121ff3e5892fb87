// The simulator's fal queue dialect (src/simulator/fal-routes.ts), over real HTTP: what fal's queue reference
// says its answers are, and that the Model Gateway's keys, limits and faults apply to it too.
import { describe, expect, it } from 'vitest';
import { looksLikeMp4 } from '../../src/results/download';
import type { Simulator } from '../../src/simulator/server';
import { callSimulator, simulators, type CallInit } from './simulator-test-helpers';

const sim = simulators({ jobSeconds: 0.3 });

const MODEL = 'fal-ai/wan-25-preview/text-to-video';
const APP = 'fal-ai/wan-25-preview';

const call = (s: Simulator, path: string, init: CallInit = {}) =>
  callSimulator(s, `${s.origin}/fal/${path}`, init, 'Key');

interface Queued {
  request_id: string;
  status: string;
  response_url: string;
  status_url: string;
  cancel_url: string;
  queue_position: number;
}

async function submit(s: Simulator, input: Record<string, unknown> = {}): Promise<Queued> {
  const res = await call(s, MODEL, { body: { prompt: 'a red fox in the snow', ...input } });
  expect(res.status).toBe(200);
  return (await res.json()) as Queued;
}

/** GETs an absolute URL the simulator gave, with the key. */
const get = (s: Simulator, url: string, method = 'GET') =>
  fetch(url, { method, headers: { authorization: `Key ${s.apiKey}` } });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function untilCompleted(s: Simulator, q: Queued): Promise<Record<string, unknown>> {
  for (let i = 0; i < 100; i++) {
    const res = await get(s, q.status_url);
    const body = (await res.json()) as Record<string, unknown>;
    if (body.status === 'COMPLETED') {
      expect(res.status).toBe(200);
      return body;
    }
    expect(res.status).toBe(202);
    await sleep(50);
  }
  throw new Error('never completed');
}

describe('simulator, fal queue: a request from submit to video', () => {
  it('queues, reports IN_QUEUE/IN_PROGRESS with 202 then COMPLETED with 200, and serves the video', async () => {
    const s = await sim();
    const q = await submit(s, { resolution: '480p', duration: '5' });
    expect(q).toMatchObject({ status: 'IN_QUEUE', queue_position: 0 });
    // A model with a sub-path: status, result and cancel URLs use the app only.
    const base = `${s.origin}/fal/${APP}/requests/${q.request_id}`;
    expect(q).toMatchObject({
      response_url: base,
      status_url: `${base}/status`,
      cancel_url: `${base}/cancel`,
    });

    const first = await get(s, q.status_url);
    expect(first.status).toBe(202);
    expect(['IN_QUEUE', 'IN_PROGRESS']).toContain(((await first.json()) as { status: string }).status);
    const done = await untilCompleted(s, q);
    expect(done).toMatchObject({ request_id: q.request_id, response_url: base });
    expect(done.error).toBeUndefined();

    const result = await get(s, q.response_url);
    expect(result.status).toBe(200);
    const { video } = (await result.json()) as {
      video: { url: string; content_type: string; file_size: number };
    };
    expect(video.content_type).toBe('video/mp4');
    const bytes = Buffer.from(await (await fetch(video.url)).arrayBuffer());
    expect(looksLikeMp4(bytes)).toBe(true);
    expect(bytes.length).toBe(video.file_size);

    const stats = s.stats();
    expect(stats.jobsCreated).toBe(1);
    expect(stats.completedJobsNeverDelivered).toBe(0);
    expect(stats.requests['POST /fal/{model}']).toEqual({ 200: 1 });
    expect(stats.requests['GET /fal/{app}/requests/{id}']).toEqual({ 200: 1 });
    expect(Object.keys(stats.requests['GET /fal/{app}/requests/{id}/status'] ?? {})).toEqual(
      expect.arrayContaining(['200', '202']),
    );
  });

  it('answers a result asked too early with 400, and the full model path or another app with 404', async () => {
    const s = await sim({ jobSeconds: 5 });
    const q = await submit(s);
    expect((await get(s, q.response_url)).status).toBe(400);
    expect((await call(s, `${MODEL}/requests/${q.request_id}/status`)).status).toBe(404);
    expect((await call(s, `fal-ai/other-app/requests/${q.request_id}/status`)).status).toBe(404);
    expect((await call(s, `${APP}/requests/nope/status`)).status).toBe(404);
    expect((await call(s, 'fal-ai/no-such-model', { body: { prompt: 'x' } })).status).toBe(404);
  });
});

describe('simulator, fal queue: keys', () => {
  it('takes the key as `Key <key>` only, and refuses others as /v1 does, counted the same', async () => {
    const s = await sim();
    for (const auth of ['', `Bearer ${s.apiKey}`, 'Key sk-not-a-key']) {
      const res = await call(s, MODEL, { body: { prompt: 'x' }, auth });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ detail: 'unauthorized' });
    }
    const stats = s.stats();
    expect(stats.requestsWithoutKey).toBe(2);
    expect(stats.requestsWithUnknownKey).toBe(1);
    expect(stats.jobsCreated).toBe(0);

    const created = (await (
      await fetch(`${s.origin}/admin/keys`, { method: 'POST', body: JSON.stringify({ models: ['other'] }) })
    ).json()) as { key: string };
    expect((await call(s, MODEL, { body: { prompt: 'x' }, key: created.key })).status).toBe(403);
  });
});

describe('simulator, fal queue: failed requests', () => {
  it('ends a refused prompt COMPLETED with `error`, and its result is the 422 of fal`s error reference', async () => {
    const s = await sim({ faults: { moderationWords: ['forbidden'] } });
    const q = await submit(s, { prompt: 'a forbidden scene' });
    const done = await untilCompleted(s, q);
    expect(done).toMatchObject({ status: 'COMPLETED', error_type: 'content_policy_violation' });
    expect(typeof done.error).toBe('string');
    const result = await get(s, q.response_url);
    expect(result.status).toBe(422);
    const { detail } = (await result.json()) as { detail: { loc: string[]; type: string }[] };
    expect(detail[0]).toMatchObject({ loc: ['body', 'prompt'], type: 'content_policy_violation' });
  });

  it('queues an input the model rejects (a job is made), whose result is a 422 naming the values it takes', async () => {
    const s = await sim();
    const q = await submit(s, { duration: 7 });
    await untilCompleted(s, q);
    const result = await get(s, q.response_url);
    expect(result.status).toBe(422);
    const { detail } = (await result.json()) as { detail: unknown[] };
    expect(detail[0]).toMatchObject({
      loc: ['body', 'duration'],
      type: 'one_of',
      ctx: { expected: ['5', '10'] },
    });
    expect(s.stats().jobsCreated).toBe(1);
  });

  it('gives a failed generation a 500 result with error_type and X-Fal-Error-Type', async () => {
    const s = await sim({ faults: { jobFailure: 1 } });
    const q = await submit(s);
    expect(await untilCompleted(s, q)).toMatchObject({ error_type: 'runner_server_error' });
    const result = await get(s, q.response_url);
    expect(result.status).toBe(500);
    expect(result.headers.get('x-fal-error-type')).toBe('runner_server_error');
  });
});

describe('simulator, fal queue: cancel', () => {
  it('stops a queued request (CANCELLATION_REQUESTED), then says ALREADY_COMPLETED; an unknown one NOT_FOUND', async () => {
    const s = await sim({ jobSeconds: 30 });
    const q = await submit(s);
    const cancelled = await get(s, q.cancel_url, 'PUT');
    expect(cancelled.status).toBe(202);
    expect(await cancelled.json()).toEqual({ status: 'CANCELLATION_REQUESTED' });
    expect(await untilCompleted(s, q)).toMatchObject({ error_type: 'client_cancelled' });
    expect((await get(s, q.response_url)).status).toBe(499);
    const again = await get(s, q.cancel_url, 'PUT');
    expect(again.status).toBe(400);
    expect(await again.json()).toEqual({ status: 'ALREADY_COMPLETED' });
    const unknown = await call(s, `${APP}/requests/nope/cancel`, { method: 'PUT' });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ status: 'NOT_FOUND' });
    expect(s.stats().requests['PUT /fal/{app}/requests/{id}/cancel']).toEqual({ 202: 1, 400: 1, 404: 1 });
  });
});

describe('simulator, fal queue: the Model Gateway`s limits and faults', () => {
  it('gives 429 with Retry-After from the hold, the rate limit and injected faults, in fal`s body shape', async () => {
    const s = await sim({ rateLimit: 1, burst: 1 });
    expect((await call(s, MODEL, { body: { prompt: 'x' } })).status).toBe(200);
    const limited = await call(s, MODEL, { body: { prompt: 'x' } });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await limited.json()).toEqual({ detail: 'Rate limit exceeded.' });
    s.setOptions({ rateLimit: 0 });
    s.hold(Date.now() + 60_000);
    expect((await call(s, MODEL, { body: { prompt: 'x' } })).status).toBe(429);
    s.hold(undefined);
    s.setFaults({ error429: 1, scope: 'submit' });
    expect((await call(s, MODEL, { body: { prompt: 'x' } })).status).toBe(429);
    expect(s.stats().jobsCreated).toBe(1);
  });

  it('never refuses a submit for the running-jobs cap: fal queues it', async () => {
    const s = await sim({ maxRunningJobs: 1, jobSeconds: 30 });
    await submit(s);
    await submit(s);
    expect(s.stats().jobsCreated).toBe(2);
  });

  it('loses a submit answer after the job was made, and counts it as an ambiguous submit', async () => {
    const s = await sim({ faults: { drop: 1, scope: 'submit' } });
    await expect(call(s, MODEL, { body: { prompt: 'x' } })).rejects.toThrow();
    const stats = s.stats();
    expect(stats.jobsCreated).toBe(1);
    expect(stats.ambiguousSubmits).toEqual({ drop: 1 });
    expect(stats.jobIdsNeverDelivered).toBe(1);
  });

  it('refuses before processing with 503 (error_type) or a reset, and no job is made', async () => {
    const s = await sim({ faults: { error5xx: 1 } });
    const res = await call(s, MODEL, { body: { prompt: 'x' } });
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ error_type: 'runner_scheduling_failure' });
    s.setFaults({ error5xx: 0, resetBefore: 1 });
    await expect(call(s, MODEL, { body: { prompt: 'x' } })).rejects.toThrow();
    expect(s.stats().jobsCreated).toBe(0);
  });

  it('expires result URLs, gives a fresh one on the next result, and redirects them', async () => {
    const s = await sim({ urlTtlSeconds: 0.2, freshUrlOnCheck: true, redirectResults: 1 });
    const q = await submit(s);
    await untilCompleted(s, q);
    const first = ((await (await get(s, q.response_url)).json()) as { video: { url: string } }).video.url;
    await sleep(400);
    expect((await fetch(first)).status).toBe(403);
    const fresh = ((await (await get(s, q.response_url)).json()) as { video: { url: string } }).video.url;
    expect(fresh).not.toBe(first);
    const hop = await fetch(fresh, { redirect: 'manual' });
    expect(hop.status).toBe(302);
    expect((await fetch(fresh)).status).toBe(200);
  });

  it('answers 404 for a request it forgot (jobTtlSeconds, goneWords) and 500 for a job that errors', async () => {
    const s = await sim({ jobTtlSeconds: 0.1, faults: { goneWords: ['lost'] } });
    const q = await submit(s);
    await sleep(500);
    expect((await get(s, q.status_url)).status).toBe(404);
    const lost = await submit(s, { prompt: 'a lost fox' });
    expect((await get(s, lost.status_url)).status).toBe(404);
    expect(s.stats().goneQueries).toBe(2);
    s.setFaults({ jobError5xx: 1 });
    const broken = await submit(s);
    expect((await get(s, broken.status_url)).status).toBe(500);
  });
});
