import { afterEach, describe, expect, it } from 'vitest';
import { looksLikeMp4 } from '../src/download';
import { startSimulator, type Simulator, type SimulatorOptions } from '../src/simulator/server';

const sims: Simulator[] = [];
afterEach(async () => {
  while (sims.length) await sims.pop()?.close();
});

async function sim(options: SimulatorOptions = {}): Promise<Simulator> {
  const s = await startSimulator({ jobSeconds: 0.3, ...options });
  sims.push(s);
  return s;
}

function call(
  s: Simulator,
  path: string,
  init: { method?: string; key?: string | null; body?: unknown; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...init.headers };
  const key = init.key === undefined ? s.apiKey : init.key;
  if (key) headers.authorization = `Bearer ${key}`;
  return fetch(`${s.origin}${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers,
    body:
      init.body === undefined
        ? undefined
        : typeof init.body === 'string'
          ? init.body
          : JSON.stringify(init.body),
  });
}

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

  it('lets result URLs expire after the TTL', async () => {
    const s = await sim({ jobSeconds: 0.05, urlTtlSeconds: 0.3 });
    const { id } = (await (await call(s, '/v1/videos/generations', { body: body() })).json()) as {
      id: string;
    };
    await sleep(120);
    const r = (await (await call(s, `/v1/videos/generations/${id}`)).json()) as { data: { url: string }[] };
    expect((await fetch(r.data[0]!.url)).status).toBe(200);
    await sleep(400);
    expect((await fetch(r.data[0]!.url)).status).toBe(410);
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
