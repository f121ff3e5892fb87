// Over 400 lines: the simulator's contract with vidbatch, one route and fault after another, on one set-up.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { looksLikeMp4 } from '../../src/results/download';
import type { Simulator } from '../../src/simulator/server';
import { callSimulator, simulators, type CallInit } from './simulator-test-helpers';

const sim = simulators({ jobSeconds: 0.3 });

const call = (s: Simulator, path: string, init: CallInit = {}) =>
  callSimulator(s, `${s.origin}${path}`, init);

const body = (prompt = 'a red fox in the snow') => ({
  model: 'modelfamily-1.0-r2v',
  input: { prompt },
  parameters: { resolution: '720P', duration: 5 },
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('simulator: authentication', () => {
  it('answers 401 unauthorized for a missing or unknown key, on every endpoint', async () => {
    const s = await sim();
    for (const [path, b] of [
      ['/v1/models', undefined],
      ['/v1/videos/generations', body()],
      ['/v1/videos/generations/vid_x', undefined],
      [
        '/v1/chat/completions',
        { model: 'modelfamily-chat-1.0', messages: [{ role: 'user', content: 'hi' }] },
      ],
    ] as const) {
      for (const key of [null, 'sk-not-a-key']) {
        const res = await call(s, path, { key, body: b });
        expect(res.status).toBe(401);
        expect(await res.json()).toEqual({
          error: { code: 'unauthorized', message: 'unauthorized', type: 'error' },
        });
      }
    }
  });

  it('answers 403 for a disabled key and for a key without access to the model; re-enabling works', async () => {
    const s = await sim();
    const created = (await (
      await call(s, '/admin/keys', { body: { description: 'r2v only', models: ['modelfamily-1.1-r2v'] } })
    ).json()) as {
      id: string;
      key: string;
    };
    expect(created.key).toMatch(/^sk-/);
    const denied = await call(s, '/v1/videos/generations', { key: created.key, body: body() });
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as { error: { type: string } }).error.type).toBe('error');

    const ok = await call(s, '/v1/videos/generations', {
      key: created.key,
      body: { ...body(), model: 'modelfamily-1.1-r2v' },
    });
    expect(ok.status).toBe(200);

    expect((await call(s, `/admin/keys/${created.id}/disable`, { method: 'POST' })).status).toBe(200);
    expect((await call(s, '/v1/models', { key: created.key })).status).toBe(403);
    await call(s, `/admin/keys/${created.id}/enable`, { method: 'POST' });
    expect((await call(s, '/v1/models', { key: created.key })).status).toBe(200);
    expect((await call(s, `/admin/keys/${created.id}`, { method: 'DELETE' })).status).toBe(200);
    expect((await call(s, '/v1/models', { key: created.key })).status).toBe(401);
  });

  it('never shows a full key again after creation', async () => {
    const s = await sim({ apiKeys: ['sk-known-at-start'] });
    const list = await (await call(s, '/admin/keys')).text();
    expect(list).not.toContain('sk-');
    expect(s.apiKey).toBe('sk-known-at-start');
  });
});

describe('simulator: video jobs', () => {
  it('runs a job queued -> running -> completed and serves a valid MP4 at the URL', async () => {
    const s = await sim({ jobSeconds: 0.6 });
    const submit = await call(s, '/v1/videos/generations', { body: body() });
    expect(submit.status).toBe(200);
    const job = (await submit.json()) as { id: string; object: string; status: string };
    expect(job).toMatchObject({ object: 'video.generation.job', status: 'queued' });
    expect(job.id).toMatch(/^vid_/);

    const seen = new Set<string>();
    let result: { status: string; data?: { url: string }[] } = { status: '' };
    for (let i = 0; i < 50 && result.status !== 'completed'; i++) {
      result = (await (await call(s, `/v1/videos/generations/${job.id}`)).json()) as typeof result;
      seen.add(result.status);
      await sleep(40);
    }
    expect([...seen]).toEqual(['queued', 'running', 'completed']);
    const url = result.data?.[0]?.url ?? '';
    expect(url).toMatch(/\.mp4/);
    const video = await fetch(url);
    expect(video.headers.get('content-type')).toBe('video/mp4');
    expect(looksLikeMp4(new Uint8Array(await video.arrayBuffer()))).toBe(true);
  });

  it('lets result URLs expire after the TTL (403, as object stores answer)', async () => {
    const s = await sim({ jobSeconds: 0.05, urlTtlSeconds: 0.3 });
    const { id } = (await (await call(s, '/v1/videos/generations', { body: body() })).json()) as {
      id: string;
    };
    await sleep(120);
    const r = (await (await call(s, `/v1/videos/generations/${id}`)).json()) as { data: { url: string }[] };
    expect((await fetch(r.data[0]!.url)).status).toBe(200);
    await sleep(400);
    expect((await fetch(r.data[0]!.url)).status).toBe(403);
  });

  it('rejects invalid bodies and unknown job ids with a clear 4xx in the error envelope', async () => {
    const s = await sim();
    const cases: [unknown, RegExp][] = [
      ['{not json', /not valid JSON/],
      [{ ...body(), input: {} }, /input.prompt/],
      [
        { ...body(), parameters: { resolution: '720P', duration: 5.5 } },
        /parameters.duration: must be an integer/,
      ],
      [{ ...body(), parameters: { resolution: '9000P' } }, /parameters.resolution/],
      [{ ...body(), model: 'nope' }, /unknown model nope/],
    ];
    for (const [b, message] of cases) {
      const res = await call(s, '/v1/videos/generations', { body: b });
      expect(res.status).toBe(400);
      const err = ((await res.json()) as { error: { message: string; type: string } }).error;
      expect(err.message).toMatch(message);
      expect(err.type).toBe('error');
    }
    const missing = await call(s, '/v1/videos/generations/vid_nope');
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('not_found');
  });

  it('fails jobs whose prompt trips moderation, with a code and message', async () => {
    const s = await sim({ jobSeconds: 0.05, faults: { moderationWords: ['forbidden'] } });
    const { id } = (await (
      await call(s, '/v1/videos/generations', { body: body('a Forbidden dance') })
    ).json()) as { id: string };
    await sleep(100);
    const r = (await (await call(s, `/v1/videos/generations/${id}`)).json()) as {
      status: string;
      error: { code: string };
    };
    expect(r.status).toBe('failed');
    expect(r.error.code).toBe('content_moderation');
  });

  it('returns the same job for a repeated Idempotency-Key when told to honour it, and counts it', async () => {
    const s = await sim({ idempotency: true });
    const headers = { 'idempotency-key': 'batch-1:row-1' };
    const a = (await (await call(s, '/v1/videos/generations', { body: body(), headers })).json()) as {
      id: string;
    };
    const b = (await (await call(s, '/v1/videos/generations', { body: body(), headers })).json()) as {
      id: string;
    };
    expect(b.id).toBe(a.id);
    await call(s, '/v1/videos/generations', { body: body() }); // no key: a second job for the same body
    const stats = s.stats();
    expect(stats.jobsCreated).toBe(2);
    expect(stats.idempotentReplays).toBe(1);
    expect(stats.jobsPerIdenticalBody).toEqual({ 2: 1 });
    expect(stats.bodiesWithMultipleJobs).toBe(1);
  });

  it('lists models, including another version of the family, and answers chat completions', async () => {
    const s = await sim();
    const models = (await (await call(s, '/v1/models')).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(
      expect.arrayContaining(['modelfamily-1.0-r2v', 'modelfamily-1.1-r2v']),
    );
    const chat = (await (
      await call(s, '/v1/chat/completions', {
        body: { model: 'modelfamily-chat-1.0', messages: [{ role: 'user', content: 'hi' }] },
      })
    ).json()) as { object: string; choices: { message: { role: string; content: string } }[] };
    expect(chat.object).toBe('chat.completion');
    expect(chat.choices[0]?.message.role).toBe('assistant');
  });
});

describe('simulator: limits', () => {
  it('rate limits per key with 429 and Retry-After in seconds', async () => {
    const s = await sim({ rateLimit: 2, burst: 2 });
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await call(s, '/v1/models')).status);
    expect(statuses.slice(0, 2)).toEqual([200, 200]);
    const limited = await call(s, '/v1/models');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(s.stats().rateLimited).toBeGreaterThanOrEqual(2);
    // another key has its own bucket
    const other = (await (await call(s, '/admin/keys', { body: {} })).json()) as { key: string };
    expect((await call(s, '/v1/models', { key: other.key })).status).toBe(200);
  });

  it('can send Retry-After as an HTTP-date', async () => {
    const s = await sim({ rateLimit: 1, burst: 1, retryAfterFormat: 'date' });
    await call(s, '/v1/models');
    const limited = await call(s, '/v1/models');
    expect(limited.status).toBe(429);
    const date = Date.parse(limited.headers.get('retry-after') ?? '');
    expect(date).toBeGreaterThan(Date.now());
  });

  it('caps concurrently running jobs per key', async () => {
    const s = await sim({ jobSeconds: 0.5, maxRunningJobs: 2 });
    expect((await call(s, '/v1/videos/generations', { body: body('a') })).status).toBe(200);
    expect((await call(s, '/v1/videos/generations', { body: body('b') })).status).toBe(200);
    const third = await call(s, '/v1/videos/generations', { body: body('c') });
    expect(third.status).toBe(429);
    expect(((await third.json()) as { error: { code: string } }).error.code).toBe('too_many_running_jobs');
    await sleep(600);
    expect((await call(s, '/v1/videos/generations', { body: body('c') })).status).toBe(200);
  });
});

describe('simulator: fault injection', () => {
  it('injects 5xx, malformed JSON and dropped connections, reproducibly from a seed', async () => {
    const run = async () => {
      const s = await sim({ seed: 42, faults: { error5xx: 0.3, malformed: 0.2, drop: 0.2 } });
      const outcomes: string[] = [];
      for (let i = 0; i < 40; i++) {
        try {
          const res = await call(s, '/v1/models');
          const text = await res.text();
          outcomes.push(
            res.status === 200 ? (text.startsWith('{"object"') ? 'ok' : 'malformed') : String(res.status),
          );
        } catch {
          outcomes.push('dropped');
        }
      }
      return outcomes;
    };
    const first = await run();
    expect(new Set(first)).toEqual(new Set(['ok', '503', 'malformed', 'dropped']));
    expect(await run()).toEqual(first);
  });

  it('delays responses beyond a client timeout after processing the request', async () => {
    const s = await sim({ faults: { slow: 1, slowMs: 400 } });
    const error = await fetch(`${s.baseUrl}/videos/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body()),
      signal: AbortSignal.timeout(100),
    }).catch((e: unknown) => e);
    expect((error as Error).name).toBe('TimeoutError');
    expect(s.stats().jobsCreated).toBe(1); // the outcome was unknown to the client, but the job exists
  });

  it('reports status values outside the documented set', async () => {
    const s = await sim({ jobSeconds: 5, faults: { unknownStatus: 1 } });
    const { id } = (await (await call(s, '/v1/videos/generations', { body: body() })).json()) as {
      id: string;
    };
    const r = (await (await call(s, `/v1/videos/generations/${id}`)).json()) as { status: string };
    expect(r.status).toBe('warming_up');
  });

  it('counts requests by endpoint and status', async () => {
    const s = await sim();
    await call(s, '/v1/models');
    await call(s, '/v1/models', { key: null });
    await call(s, '/v1/videos/generations/vid_1');
    const { requests } = (await (await call(s, '/admin/stats')).json()) as {
      requests: Record<string, Record<string, number>>;
    };
    expect(requests['GET /v1/models']).toEqual({ 200: 1, 401: 1 });
    expect(requests['GET /v1/videos/generations/{id}']).toEqual({ 404: 1 });
  });
});

async function until(check: () => boolean, ms = 2000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(10);
  }
}

const submit = (s: Simulator, headers: Record<string, string> = {}, prompt?: string) =>
  call(s, '/v1/videos/generations', { body: body(prompt), headers });

const admin = (s: Simulator, path: string, b?: unknown, method?: string) =>
  call(s, `/admin/${path}`, { key: null, body: b, ...(method ? { method } : {}) });

describe('simulator: Idempotency-Key', () => {
  it('ignores the key by default: every POST is a new billable job, counted per key', async () => {
    const s = await sim();
    const headers = { 'idempotency-key': 'batch-1:row-1' };
    const a = (await (await submit(s, headers)).json()) as { id: string };
    const b = (await (await submit(s, headers)).json()) as { id: string };
    expect(b.id).not.toBe(a.id);
    await submit(s, { 'idempotency-key': 'batch-1:row-2' }, 'another prompt');
    const stats = s.stats();
    expect(stats.jobsCreated).toBe(3);
    expect(stats.idempotentReplays).toBe(0);
    expect(stats.jobsPerIdempotencyKey).toEqual({ 1: 1, 2: 1 });
    expect(stats.idempotencyKeysWithMultipleJobs).toBe(1);
    expect(stats.idempotencyKeysBilledMoreThanOnce).toEqual({ 'batch-1:row-1': 2 });
    expect(stats.bodiesWithMultipleJobs).toBe(1);
  });

  it('can be told at runtime to honour it (POST /admin/options)', async () => {
    const s = await sim();
    const headers = { 'idempotency-key': 'k1' };
    expect((await (await admin(s, 'options', { idempotency: true })).json()) as object).toMatchObject({
      idempotency: true,
    });
    const a = (await (await submit(s, headers)).json()) as { id: string };
    const b = (await (await submit(s, headers)).json()) as { id: string };
    expect(b.id).toBe(a.id);
    expect(s.stats()).toMatchObject({
      jobsCreated: 1,
      idempotentReplays: 1,
      idempotencyKeysWithMultipleJobs: 0,
    });
    expect((await admin(s, 'options', { idempotency: 'yes' })).status).toBe(400);
    expect((await admin(s, 'options', { nonsense: 1 })).status).toBe(400);
  });

  it('keeps counting jobs per key across a restart with a state file', async () => {
    const stateFile = join(await mkdtemp(join(tmpdir(), 'sim-')), 'state.json');
    const first = await sim({ stateFile });
    await submit(first, { 'idempotency-key': 'row-9' });
    await first.close();
    const second = await sim({ stateFile, apiKeys: [first.apiKey] });
    await submit(second, { 'idempotency-key': 'row-9' });
    expect(second.stats().idempotencyKeysBilledMoreThanOnce).toEqual({ 'row-9': 2 });
  });
});

describe('simulator: faults after processing (job billed, answer lost)', () => {
  const outcomes = async (s: Simulator, timeoutMs = 2000) => {
    try {
      const res = await fetch(`${s.baseUrl}/videos/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${s.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body()),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await res.text();
      return `${res.status} ${text.slice(0, 12)}`;
    } catch (e) {
      return (e as Error).name;
    }
  };

  it.each([
    ['drop', {}, /TypeError/],
    ['error502After', {}, /^502 /],
    ['error504After', {}, /^504 /],
    ['malformed', {}, /^200 \{"id": "vid_$/],
    ['slow', { slowMs: 5000 }, /TimeoutError/],
  ] as const)('%s: the job exists and is counted as an ambiguous submit', async (fault, extra, seen) => {
    const s = await sim({ faults: { [fault]: 1, scope: 'submit', ...extra } });
    expect(await outcomes(s, 300)).toMatch(seen);
    await until(() => s.stats().ambiguousSubmitsTotal === 1);
    const stats = s.stats();
    expect(stats.jobsCreated).toBe(1);
    expect(stats.ambiguousSubmits).toEqual({ [fault]: 1 });
    expect(stats.jobIdsNeverDelivered).toBe(1);
    // scope 'submit': other requests are answered normally
    expect((await call(s, '/v1/models')).status).toBe(200);
    expect(s.stats().faultsInjected).toEqual({ [fault]: 1 });
  });

  it('a slow answer the client waits for is delivered, not ambiguous', async () => {
    const s = await sim({ faults: { slow: 1, slowMs: 150 } });
    expect(await outcomes(s, 2000)).toMatch(/^200 /);
    await until(() => s.stats().jobIdsNeverDelivered === 0);
    expect(s.stats().ambiguousSubmitsTotal).toBe(0);
    expect(s.stats().faultsInjected).toEqual({ slow: 1 });
  });

  it('faults before processing create no job: reset, 503, injected 429 with a long Retry-After', async () => {
    const s = await sim({ faults: { resetBefore: 1 } });
    expect(await outcomes(s)).toBe('TypeError');
    s.setFaults({ resetBefore: 0, error5xx: 1 });
    expect(await outcomes(s)).toMatch(/^503 /);
    s.setFaults({ error5xx: 0, error429: 1, retryAfterMinSeconds: 3600 });
    const limited = await submit(s);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('3600');
    const stats = s.stats();
    expect(stats.jobsCreated).toBe(0);
    expect(stats.ambiguousSubmitsTotal).toBe(0);
    expect(stats.rateLimitedByReason).toEqual({ injected: 1 });
    expect(stats.faultsInjected).toEqual({ resetBefore: 1, error5xx: 1, error429: 1 });
  });

  it('rolls every fault kind reproducibly from a seed', async () => {
    const run = async () => {
      const s = await sim({
        seed: 7,
        faults: { resetBefore: 0.15, error429: 0.15, error502After: 0.15, error504After: 0.15, drop: 0.1 },
      });
      const seen: string[] = [];
      for (let i = 0; i < 40; i++) seen.push((await outcomes(s)).slice(0, 3));
      return { seen, stats: s.stats() };
    };
    const first = await run();
    expect(new Set(first.seen)).toEqual(new Set(['200', '429', '502', '504', 'Typ']));
    const second = await run();
    expect(second.seen).toEqual(first.seen);
    const ambiguous = first.stats.ambiguousSubmits;
    expect((ambiguous.error502After ?? 0) + (ambiguous.error504After ?? 0) + (ambiguous.drop ?? 0)).toBe(
      first.stats.jobIdsNeverDelivered,
    );
  });

  it('changes faults at runtime through /admin/faults and rejects bad settings', async () => {
    const s = await sim();
    expect((await admin(s, 'faults', { error502After: 1 })).status).toBe(200);
    expect((await submit(s)).status).toBe(502);
    expect(((await (await admin(s, 'faults')).json()) as { error502After: number }).error502After).toBe(1);
    expect((await admin(s, 'faults', { error502After: 2 })).status).toBe(400);
    expect((await admin(s, 'faults', { typo: 1 })).status).toBe(400);
    expect(() => s.setFaults({ drop: -1 })).toThrow(/drop/);
  });
});

describe('simulator: hold (quota exhausted until a time)', () => {
  it('answers every /v1 request 429 with a long Retry-After while jobs go on', async () => {
    const s = await sim({ jobSeconds: 0.2 });
    const { id } = (await (await submit(s)).json()) as { id: string };
    const held = (await (await admin(s, 'hold', { seconds: 7200 })).json()) as { remainingMs: number };
    expect(held.remainingMs).toBeGreaterThan(7_000_000);
    for (const res of [
      await call(s, `/v1/videos/generations/${id}`),
      await submit(s),
      await call(s, '/v1/models'),
    ]) {
      expect(res.status).toBe(429);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(7199);
      expect(((await res.json()) as { error: { type: string } }).error.type).toBe('error');
    }
    await sleep(300);
    let stats = s.stats();
    expect(stats).toMatchObject({ held: 3, jobsCreated: 1, jobsCompleted: 1, jobsFinishedWhileHeld: 1 });
    expect(stats.completedJobsNeverDelivered).toBe(1);
    expect((await admin(s, 'hold', undefined, 'DELETE')).status).toBe(200);
    const r = (await (await call(s, `/v1/videos/generations/${id}`)).json()) as { status: string };
    expect(r.status).toBe('completed');
    await until(() => s.stats().completedJobsNeverDelivered === 0);
    stats = s.stats();
    expect(stats.held).toBe(3);
    expect(stats.holdUntil).toBeNull();
  });

  it('can start held, with Retry-After as an HTTP-date, and be released by hold(undefined)', async () => {
    const until = new Date(Date.now() + 3 * 3600_000);
    const s = await sim({ holdUntil: until, retryAfterFormat: 'date' });
    const res = await call(s, '/v1/models');
    expect(res.status).toBe(429);
    expect(Math.abs(Date.parse(res.headers.get('retry-after') ?? '') - until.getTime())).toBeLessThan(1500);
    s.hold(undefined);
    expect((await call(s, '/v1/models')).status).toBe(200);
    expect(s.stats().rateLimitedByReason).toEqual({ held: 1 });
  });

  it('a disabled key is still refused with 403 during a hold', async () => {
    const s = await sim();
    s.hold(Date.now() + 60_000);
    [...s.state.keys.values()][0]!.enabled = false;
    expect((await call(s, '/v1/models')).status).toBe(403);
  });

  it('makes ordinary 429s carry a long Retry-After', async () => {
    const s = await sim({ rateLimit: 1, burst: 1, faults: { retryAfterMinSeconds: 5400 } });
    await call(s, '/v1/models');
    const limited = await call(s, '/v1/models');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('5400');
  });
});

describe('simulator: refused keys are counted per key', () => {
  it('counts requests with a disabled, deleted, unknown or missing key', async () => {
    const s = await sim();
    const created = (await (await admin(s, 'keys', { description: 'rotating' })).json()) as {
      id: string;
      key: string;
    };
    await admin(s, `keys/${created.id}/disable`, undefined, 'POST');
    for (let i = 0; i < 3; i++) {
      const res = await call(s, '/v1/videos/generations', { key: created.key, body: body() });
      expect(res.status).toBe(403);
      expect(await res.json()).toEqual({
        error: { code: 'key_disabled', message: 'This API key is disabled.', type: 'error' },
      });
    }
    expect(s.stats().requestsWithDisabledKey).toEqual({ [created.id]: 3 });
    await admin(s, `keys/${created.id}`, undefined, 'DELETE');
    expect((await call(s, '/v1/models', { key: created.key })).status).toBe(401);
    expect((await call(s, '/v1/models', { key: created.key })).status).toBe(401);
    await call(s, '/v1/models', { key: 'sk-never-issued' });
    await call(s, '/v1/models', { key: null });
    const stats = s.stats();
    expect(stats.requestsWithDisabledKey).toEqual({});
    expect(stats.requestsWithDeletedKey).toEqual({ [created.id]: 5 });
    expect(stats.requestsWithUnknownKey).toBe(1);
    expect(stats.requestsWithoutKey).toBe(1);
    expect(stats.jobsCreated).toBe(0);
  });
});

describe('simulator: jobs as the client sees them', () => {
  it('counts status checks per job, completed and failed jobs, and results never delivered', async () => {
    const s = await sim({ jobSeconds: 0.1 });
    const a = (await (await submit(s, {}, 'a')).json()) as { id: string };
    await submit(s, {}, 'b');
    s.setFaults({ jobFailure: 1 });
    await submit(s, {}, 'c');
    for (let i = 0; i < 3; i++) await call(s, `/v1/videos/generations/${a.id}`);
    await sleep(200);
    const done = (await (await call(s, `/v1/videos/generations/${a.id}`)).json()) as { status: string };
    expect(done.status).toBe('completed');
    await until(() => s.stats().completedJobsNeverDelivered === 1);
    const stats = s.stats();
    expect(stats).toMatchObject({ jobsCompleted: 2, jobsFailed: 1, jobsUnfinished: 0, statusChecks: 4 });
    expect(stats.statusChecksPerJob).toEqual({ 0: 2, 4: 1 });
    const job = (await (await admin(s, `jobs/${a.id}`)).json()) as Record<string, unknown>;
    expect(job).toMatchObject({ checks: 4, idDelivered: true, resultDelivered: true, status: 'completed' });
  });

  it('forgets a finished job after jobTtlSeconds: its status query answers 404', async () => {
    const s = await sim({ jobSeconds: 0.05, jobTtlSeconds: 0.3 });
    const { id } = (await (await submit(s)).json()) as { id: string };
    await sleep(100);
    expect((await call(s, `/v1/videos/generations/${id}`)).status).toBe(200);
    await sleep(400);
    const gone = await call(s, `/v1/videos/generations/${id}`);
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as { error: { code: string } }).error.code).toBe('not_found');
    expect(s.stats().goneQueries).toBe(1);
  });

  it('refuses connections during an outage, then serves again', async () => {
    const s = await sim();
    expect((await admin(s, 'outage', { seconds: 0.4 })).status).toBe(200);
    await sleep(50);
    const error = await call(s, '/v1/models').catch((e: unknown) => e);
    expect(((error as Error).cause as { code?: string }).code).toBe('ECONNREFUSED');
    await sleep(500);
    expect((await call(s, '/v1/models')).status).toBe(200);
  });
});
