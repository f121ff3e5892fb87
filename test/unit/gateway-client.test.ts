// Over 400 lines: one client, tested error class by error class against real HTTP; split, each part would
// repeat the same server set-up.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { loadGatewaySettings } from '../../src/config';
import { ConfigError } from '../../src/errors';
import {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  ConnectionError,
  GatewayError,
  KeyRefusedError,
  MalformedResponseError,
  NotFoundError,
  NotSentError,
  PermissionDeniedError,
  RateLimitError,
  ServerError,
  TimeoutError,
  WorkerStoppingError,
} from '../../src/gateway/errors';
import { GatewayClient, type CallOptions } from '../../src/gateway/client';
import { MAX_RETRY_AFTER_MS, parseRetryAfter } from '../../src/gateway/retry-after';
import { canonicalStatus } from '../../src/gateway/status';
import { freePort } from '../../src/dev-server/dev-server';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/server';

const sims: Simulator[] = [];
afterEach(async () => {
  while (sims.length) await sims.pop()?.close();
});

async function setup(options: SimulatorOptions = {}, timeoutMs = 2000) {
  const sim = await startSimulator({ jobSeconds: 0.2, ...options });
  sims.push(sim);
  const client = new GatewayClient({ baseUrl: sim.baseUrl, apiKey: () => sim.apiKey, timeoutMs });
  return { sim, client };
}

/** A bare HTTP server answering as `handler` says, and a client of it: for answers the simulator never gives. */
async function rawGateway(handler: Parameters<typeof createServer>[1], apiKey: () => string = () => 'sk-x') {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const client = new GatewayClient({ baseUrl: `http://127.0.0.1:${port}/v1`, apiKey, timeoutMs: 1000 });
  return { server, client };
}

const request = {
  model: 'modelfamily-1.0-r2v',
  input: { prompt: 'a fox' },
  parameters: { resolution: '720P', duration: 5 },
};

describe('parseRetryAfter', () => {
  it('reads seconds and HTTP-dates, and ignores junk', () => {
    const now = Date.parse('2026-11-22T10:00:00Z');
    expect(parseRetryAfter('7', now)).toBe(7000);
    expect(parseRetryAfter('1.5', now)).toBe(1500);
    expect(parseRetryAfter('Sun, 22 Nov 2026 10:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Sun, 22 Nov 2026 09:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    // Never 0 by accident: Date.parse would read '-5' as a date long past.
    expect(parseRetryAfter('-5', now)).toBeUndefined();
    expect(parseRetryAfter('', now)).toBeUndefined();
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
  });
});

describe('canonicalStatus', () => {
  it('maps synonyms to canonical states and anything else to unknown', () => {
    expect(['queued', 'Pending', 'in_queue'].map(canonicalStatus)).toEqual(['queued', 'queued', 'queued']);
    expect(['running', 'IN PROGRESS', 'processing'].map(canonicalStatus)).toEqual([
      'running',
      'running',
      'running',
    ]);
    expect(['completed', 'succeeded', 'done'].map(canonicalStatus)).toEqual([
      'completed',
      'completed',
      'completed',
    ]);
    expect(['failed', 'canceled', 'cancelled', 'expired'].map(canonicalStatus)).toEqual([
      'failed',
      'failed',
      'failed',
      'failed',
    ]);
    expect(canonicalStatus('warming_up')).toBe('unknown');
    // A status that says the gateway no longer knows the job (one provider's answer past 24 h).
    expect(['UNKNOWN', 'not_found', 'Not Found'].map(canonicalStatus)).toEqual(['gone', 'gone', 'gone']);
  });
});

describe('loadGatewaySettings', () => {
  it('fails fast naming the missing variable', () => {
    expect(() => loadGatewaySettings({})).toThrow(/GATEWAY_BASE_URL/);
    expect(() => loadGatewaySettings({ GATEWAY_BASE_URL: 'http://x/v1' })).toThrow(/GATEWAY_API_KEY/);
    expect(() => loadGatewaySettings({ GATEWAY_BASE_URL: 'http://x/api', GATEWAY_API_KEY: 'sk-1' })).toThrow(
      ConfigError,
    );
    const settings = loadGatewaySettings({ GATEWAY_BASE_URL: 'http://x/v1/', GATEWAY_API_KEY: 'sk-1' });
    expect(settings.baseUrl).toBe('http://x/v1');
    expect(settings.apiKey()).toBe('sk-1');
  });
});

describe('GatewayClient against the simulator', () => {
  it('submits and follows a job to completion with its URL', async () => {
    const { client } = await setup();
    const job = await client.submit(request, 'k1');
    expect(job).toMatchObject({ status: 'queued' });
    await new Promise((r) => setTimeout(r, 300));
    expect(await client.getJob(job.id)).toMatchObject({
      id: job.id,
      status: 'completed',
      url: expect.stringMatching(/\.mp4/) as unknown,
    });
    expect(await client.listModels()).toContain('modelfamily-1.0-r2v');
  });

  it('raises one typed error per HTTP failure class', async () => {
    const { sim, client } = await setup();
    const bad = new GatewayClient({ baseUrl: sim.baseUrl, apiKey: () => 'sk-wrong', timeoutMs: 2000 });
    await expect(bad.listModels()).rejects.toBeInstanceOf(AuthenticationError);
    const restricted = sim.state.createKey('r', ['modelfamily-1.1-r2v']);
    const denied = new GatewayClient({ baseUrl: sim.baseUrl, apiKey: () => restricted.key, timeoutMs: 2000 });
    await expect(denied.submit(request, 'k')).rejects.toBeInstanceOf(PermissionDeniedError);
    await expect(client.getJob('vid_missing')).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.submit({ ...request, model: 'nope' }, 'k')).rejects.toBeInstanceOf(BadRequestError);
    sim.setFaults({ error5xx: 1 });
    await expect(client.listModels()).rejects.toBeInstanceOf(ServerError);
    sim.setFaults({ error5xx: 0, malformed: 1 });
    await expect(client.listModels()).rejects.toBeInstanceOf(MalformedResponseError);
    sim.setFaults({ malformed: 0, drop: 1 });
    await expect(client.listModels()).rejects.toBeInstanceOf(ConnectionError);
  });

  it('times out a slow response', async () => {
    const { client } = await setup({ faults: { slow: 1, slowMs: 1000 } }, 200);
    await expect(client.submit(request, 'k')).rejects.toBeInstanceOf(TimeoutError);
  });

  it('reports a refused connection as ConnectionError', async () => {
    const client = new GatewayClient({
      baseUrl: `http://127.0.0.1:${await freePort()}/v1`,
      apiKey: () => 'sk-x',
      timeoutMs: 1000,
    });
    await expect(client.listModels()).rejects.toBeInstanceOf(ConnectionError);
  });

  it('parses Retry-After (seconds and date) and holds the calls of that kind until then, and a second at most', async () => {
    for (const retryAfterFormat of ['seconds', 'date'] as const) {
      const { client } = await setup({ rateLimit: 1, burst: 1, retryAfterFormat });
      await client.listModels();
      const error = await client.listModels().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RateLimitError);
      const wait = (error as RateLimitError).retryAfterMs ?? 0;
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(2000);
      const hold = client.holds.remainingMs('status');
      expect(hold).toBeGreaterThan(0);
      expect(client.holds.remainingMs('submit')).toBe(0); // a 429 on a check holds checks only
      const started = Date.now();
      await client.listModels(); // waits out the hold, then goes through
      expect(Date.now() - started).toBeGreaterThanOrEqual(hold - 50);
      expect(Date.now() - started).toBeLessThan(hold + 1000 + 500); // spread by a second at most
      // A hold longer than the caller can wait: not sent, with when to come back.
      await client.listModels().catch(() => undefined);
      const left = client.holds.remainingMs('status');
      if (left > 100) {
        const busy = await client.getJob('vid_x', { maxWaitMs: 10 }).catch((e: unknown) => e);
        expect(busy).toBeInstanceOf(NotSentError);
        expect((busy as NotSentError).retryAfterMs).toBeGreaterThanOrEqual(left - 50);
      }
    }
  });

  it('maps undocumented status values to unknown instead of failing', async () => {
    const { client } = await setup({ jobSeconds: 5, faults: { unknownStatus: 1 } });
    const { id } = await client.submit(request, 'k');
    expect(await client.getJob(id)).toMatchObject({ status: 'unknown', rawStatus: 'warming_up' });
  });

  it('never puts the API key into error text, even when the gateway echoes it', async () => {
    const secret = 'sk-very-secret-key-123';
    const { server, client } = await rawGateway(
      (req, res) => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ error: { code: 'oops', message: `bad header ${req.headers.authorization}` } }),
        );
      },
      () => secret,
    );
    const error = (await client.listModels().catch((e: unknown) => e)) as Error;
    server.close();
    expect(error).toBeInstanceOf(ServerError);
    expect(error.message).toContain('[redacted]');
    expect(JSON.stringify({ m: error.message, s: error.stack })).not.toContain(secret);
  });
});

describe('a Retry-After over the cap', () => {
  it('waits the cap, not the days a header in milliseconds would ask, and says what was asked', async () => {
    const { server, client } = await rawGateway((_req, res) => {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '86400000' });
      res.end(JSON.stringify({ error: { code: 'rate_limited', message: 'slow down' } }));
    });
    const error = (await client.listModels().catch((e: unknown) => e)) as RateLimitError;
    server.close();
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error.retryAfterMs).toBe(MAX_RETRY_AFTER_MS);
    expect(error.clampedFromMs).toBe(86_400_000_000);
  });
});

describe("the gateway's request id", () => {
  const REQUEST_ID = /^req_[0-9a-f]{24}$/;

  it('is on every answer and every error of the simulator, and at the end of each error message', async () => {
    const { sim, client } = await setup({ rateLimit: 1, burst: 1 });
    const job = await client.submit(request, 'k1');
    expect(job.requestId).toMatch(REQUEST_ID);
    // 429: the bucket of one token is empty.
    const limited = await failure<RateLimitError>(client.getJob(job.id));
    expect(limited).toBeInstanceOf(RateLimitError);
    expect(limited!.requestId).toMatch(REQUEST_ID);
    expect(limited!.message).toMatch(/: 429 .* \(request id req_[0-9a-f]{24}\)$/);
    sim.setOptions({ rateLimit: 0 });
    const other = new GatewayClient({ baseUrl: sim.baseUrl, apiKey: () => sim.apiKey, timeoutMs: 2000 });
    const state = await other.getJob(job.id);
    expect(state.requestId).toMatch(REQUEST_ID);
    expect(state.requestId).not.toBe(job.requestId); // one id per request
    const missing = await failure<NotFoundError>(other.getJob('vid_nope'));
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing!.message).toBe(
      `GET /videos/generations/vid_nope: 404 No job with id vid_nope. (request id ${missing!.requestId})`,
    );
    const bad = await failure<BadRequestError>(other.submit({ ...request, model: 'nope' }, 'k2'));
    expect(bad!.requestId).toMatch(REQUEST_ID);
    const wrongKey = new GatewayClient({ baseUrl: sim.baseUrl, apiKey: () => 'sk-wrong', timeoutMs: 2000 });
    const unauthorized = await failure<AuthenticationError>(wrongKey.listModels());
    expect(unauthorized).toBeInstanceOf(AuthenticationError);
    expect(unauthorized!.requestId).toMatch(REQUEST_ID);
    expect(unauthorized!.message).toContain(`(request id ${unauthorized!.requestId})`);
    // The simulator's other answers carry one too: admin, files, unknown paths.
    for (const path of ['/admin/stats', '/files/vid_nope.mp4', '/nowhere']) {
      expect((await fetch(`${sim.origin}${path}`)).headers.get('x-request-id'), path).toMatch(REQUEST_ID);
    }
  });

  it('is kept from any gateway, on 5xx and unreadable 2xx answers, and left out when absent or not printable', async () => {
    const answers: [number, string, Record<string, string>][] = [
      [502, '<html>bad gateway</html>', { 'x-request-id': 'req_upstream_502' }],
      [200, '{"id": "vid_', { 'x-request-id': 'req_torn' }],
      [503, 'unavailable', {}],
      [500, 'oops', { 'x-request-id': 'id with spaces' }],
    ];
    const { server, client } = await rawGateway((_req, res) => {
      const [status, body, headers] = answers.shift()!;
      res.writeHead(status, headers);
      res.end(body);
    });
    const proxy = await failure<ServerError>(client.submit(request, 'k'));
    const torn = await failure<MalformedResponseError>(client.submit(request, 'k'));
    const anonymous = await failure<ServerError>(client.getJob('vid_1'));
    const junk = await failure<ServerError>(client.getJob('vid_1'));
    server.close();
    expect(proxy).toBeInstanceOf(ServerError);
    expect(proxy!.requestId).toBe('req_upstream_502');
    expect(proxy!.message).toBe(
      'POST /videos/generations: 502 <html>bad gateway</html> (request id req_upstream_502)',
    );
    expect(torn).toBeInstanceOf(MalformedResponseError);
    expect(torn!.requestId).toBe('req_torn');
    expect(torn!.message).toContain('(request id req_torn)');
    expect(anonymous!.requestId).toBeUndefined();
    expect(anonymous!.message).toBe('GET /videos/generations/vid_1: 503 unavailable');
    expect(junk!.requestId).toBeUndefined();
  });
});

describe('key redaction in error text', () => {
  /** A client against a server that answers every request `status` with `body(authorization header)`. */
  async function echoing(secret: string, status: number, body: (authorization: string) => string) {
    const { server, client } = await rawGateway(
      (req, res) => {
        res.writeHead(status, { 'content-type': 'text/plain' });
        res.end(body(req.headers.authorization ?? ''));
      },
      () => secret,
    );
    return { client, close: () => server.close() };
  }

  it('redacts the key before cutting a non-JSON body, so no part of a key that straddles the cut survives', async () => {
    const secret = `sk-${'a1b2c3d4e5'.repeat(4)}`;
    // The echoed key starts at character ~176 of the body and runs past the 200-character cut.
    const prefix = `upstream said: ${'x'.repeat(137)} authorization: `;
    const { client, close } = await echoing(secret, 502, (auth) => `${prefix}${auth}\nmore text`);
    const error = (await client.listModels().catch((e: unknown) => e)) as ServerError;
    close();
    expect(prefix.length + 'Bearer '.length).toBeGreaterThan(170);
    expect(prefix.length + 'Bearer '.length).toBeLessThan(200);
    expect(error).toBeInstanceOf(ServerError);
    expect(error.message).not.toContain('a1b2c3');
    expect(error.message).not.toContain('sk-');
    expect(error.message).toContain('authorization: [redacted]');
  });

  it('redacts any bearer token or Authorization value echoed back, not only the current key', async () => {
    const secret = 'sk-current-key-0001';
    const { client, close } = await echoing(
      secret,
      400,
      () => 'proxy: rejected Bearer sk-old-rotated-key-9999; "Authorization":"Basic dXNlcjpwYXNz", retry',
    );
    const error = (await client.getJob('vid_1').catch((e: unknown) => e)) as BadRequestError;
    close();
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error.message).toContain('Bearer [redacted]');
    expect(error.message).toContain('"Authorization":"[redacted]"');
    expect(error.message).not.toContain('sk-old-rotated-key-9999');
    expect(error.message).not.toContain('dXNlcjpwYXNz');
  });

  it('redacts any sk- token in the JSON error, a job error, its code and its status, not only the current key', async () => {
    const other = 'sk-proxy-own-key-ABCDEF123456';
    const { server, client } = await rawGateway((req, res) => {
      res.writeHead(req.url?.endsWith('/vid_2') ? 200 : 400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          req.url?.endsWith('/vid_2')
            ? {
                id: 'vid_2',
                status: `failed ${other}`,
                error: { code: `bad_${other}`, message: `upstream key ${other} was refused` },
              }
            : { error: { code: other, message: `key ${other} (key=${other}) is not allowed` } },
        ),
      );
    });
    const refused = (await client.getJob('vid_1').catch((e: unknown) => e)) as BadRequestError;
    const job = await client.getJob('vid_2');
    server.close();
    const kept = JSON.stringify([refused.message, refused.code, job]);
    expect(kept).not.toContain('ABCDEF123456');
    expect(refused.message).toBe(
      'GET /videos/generations/vid_1: 400 key [redacted] (key=[redacted]) is not allowed',
    );
    expect(job.error).toEqual({ code: 'bad_[redacted]', message: 'upstream key [redacted] was refused' });
    expect(job.rawStatus).toBe('failed [redacted]');
  });
});

/** The error a call rejected with (undefined when it succeeded). */
const failure = <T>(call: Promise<unknown>): Promise<T | undefined> =>
  call.then(
    () => undefined,
    (e: unknown) => e as T,
  );

describe('submit outcome: not sent / refused vs unknown', () => {
  /** The error a submit raises, and how many jobs the gateway made for it. */
  async function submitOutcome(
    options: SimulatorOptions,
    client?: (sim: Simulator) => GatewayClient,
    callOptions: CallOptions = {},
  ) {
    const { sim, client: c } = await setup(options);
    const error = await (client ? client(sim) : c)
      .submit(request, 'k', callOptions)
      .then(() => undefined)
      .catch((e: unknown) => e as GatewayError);
    return { error, jobs: sim.stats().jobsCreated, sim };
  }

  it('answers that refuse the request are known: no job was made', async () => {
    const cases: [SimulatorOptions, ((sim: Simulator) => GatewayClient) | undefined, unknown][] = [
      [
        {},
        (sim) => new GatewayClient({ baseUrl: sim.baseUrl, apiKey: () => 'sk-wrong', timeoutMs: 2000 }),
        AuthenticationError,
      ],
      [{ faults: { error429: 1 } }, undefined, RateLimitError],
    ];
    for (const [options, client, type] of cases) {
      const { error, jobs } = await submitOutcome(options, client);
      expect(error).toBeInstanceOf(type);
      expect(error?.outcomeUnknown).toBe(false);
      expect(jobs).toBe(0);
    }
    const { sim, client } = await setup();
    const bad = await failure<GatewayError>(client.submit({ ...request, model: 'nope' }, 'k'));
    expect(bad).toBeInstanceOf(BadRequestError);
    expect(bad?.outcomeUnknown).toBe(false);
    sim.state.findKey(sim.apiKey)!.enabled = false;
    const disabled = await failure<GatewayError>(client.submit(request, 'k'));
    expect(disabled).toBeInstanceOf(PermissionDeniedError);
    expect(disabled?.outcomeUnknown).toBe(false);
    expect(sim.stats().jobsCreated).toBe(0);
  });

  it('a 409 is unknown: an idempotent gateway answers it while the same key is still in progress', async () => {
    let posts = 0;
    const { server, client } = await rawGateway((req, res) => {
      if (req.method === 'POST') posts += 1;
      res.writeHead(409, { 'content-type': 'application/json', 'x-request-id': 'req_409' });
      res.end(
        JSON.stringify({
          error: { code: 'idempotency_key_in_use', message: 'a request with this key is in progress' },
        }),
      );
    });
    const submitted = await failure<GatewayError>(client.submit(request, 'vidbatch:b:r1'));
    const checked = await failure<GatewayError>(client.getJob('vid_1'));
    server.close();
    expect(posts).toBe(1);
    expect(submitted).toBeInstanceOf(ConflictError);
    expect(submitted?.outcomeUnknown).toBe(true);
    expect(submitted).toMatchObject({ status: 409, code: 'idempotency_key_in_use', requestId: 'req_409' });
    expect(submitted?.message).toBe(
      'POST /videos/generations: 409 a request with this key is in progress (request id req_409)',
    );
    // A status check's 409 is refused like any other 4xx (outcomeUnknown speaks only for a submit).
    expect(checked).toBeInstanceOf(BadRequestError);
  });

  it('a refused connection is known not sent', async () => {
    const client = new GatewayClient({
      baseUrl: `http://127.0.0.1:${await freePort()}/v1`,
      apiKey: () => 'sk-x',
      timeoutMs: 1000,
    });
    const error = await failure<ConnectionError>(client.submit(request, 'k'));
    expect(error).toBeInstanceOf(ConnectionError);
    expect(error?.beforeSending).toBe(true);
    expect(error?.outcomeUnknown).toBe(false);
    expect(error?.message).toMatch(/nothing sent/);
  });

  it('silence, resets, 5xx and unreadable 2xx are unknown: a job may exist', async () => {
    const cases: [SimulatorOptions, unknown, boolean][] = [
      // [faults, error class, whether the simulator made a job before failing]
      [{ faults: { drop: 1 } }, ConnectionError, true],
      [{ faults: { error502After: 1 } }, ServerError, true],
      [{ faults: { error504After: 1 } }, ServerError, true],
      [{ faults: { malformed: 1 } }, MalformedResponseError, true],
      [{ faults: { slow: 1, slowMs: 1500 } }, TimeoutError, true],
      // Before processing, but the client cannot tell: still unknown.
      [{ faults: { error5xx: 1 } }, ServerError, false],
      [{ faults: { resetBefore: 1 } }, ConnectionError, false],
    ];
    for (const [options, type, made] of cases) {
      const { error, jobs } = await submitOutcome(
        options,
        (sim) =>
          new GatewayClient({
            baseUrl: sim.baseUrl,
            apiKey: () => sim.apiKey,
            timeoutMs: 100,
            submitTimeoutMs: 500,
          }),
      );
      expect(error, JSON.stringify(options)).toBeInstanceOf(type);
      expect(error?.outcomeUnknown, JSON.stringify(options)).toBe(true);
      expect(jobs, JSON.stringify(options)).toBe(made ? 1 : 0);
    }
  });

  it('gives a submit its own, longer timeout than a status check', async () => {
    const { sim } = await setup({ faults: { slow: 1, slowMs: 400, scope: 'submit' } });
    const client = new GatewayClient({
      baseUrl: sim.baseUrl,
      apiKey: () => sim.apiKey,
      timeoutMs: 100,
      submitTimeoutMs: 3000,
    });
    expect((await client.submit(request, 'k')).id).toMatch(/^vid_/);
  });

  it("keeps the HTTP timeout inside the caller's attempt, and sends nothing when too little time is left", async () => {
    const { sim } = await setup({ faults: { slow: 1, slowMs: 3000 } });
    const client = new GatewayClient({
      baseUrl: sim.baseUrl,
      apiKey: () => sim.apiKey,
      timeoutMs: 5000,
      submitTimeoutMs: 5000,
    });
    const started = Date.now();
    const error = await client.submit(request, 'k', { sendBy: Date.now() + 400 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TimeoutError);
    expect(Date.now() - started).toBeLessThan(1500);
    const before = sim.state.jobs.size; // the slow submit above made its job at once
    let sent = false;
    const late = await client
      .submit(request, 'k', { sendBy: Date.now() + 50, beforeSend: () => void (sent = true) })
      .catch((e: unknown) => e);
    expect(late).toBeInstanceOf(NotSentError);
    expect(sent).toBe(false);
    expect(sim.state.jobs.size).toBe(before);
    // A beforeSend that fails (the heartbeat could not be recorded) sends nothing and is the call's error.
    const unrecorded = await client
      .submit(request, 'k', { beforeSend: () => Promise.reject(new Error('heartbeat not recorded')) })
      .catch((e: unknown) => e);
    expect(unrecorded).toMatchObject({ message: 'heartbeat not recorded' });
    expect(sim.state.jobs.size).toBe(before);
    expect(before).toBe(1);
  });
});

describe('a refused key stops at once', () => {
  it('refuses every later call with that key locally, calls waiting out a hold included, until resumed or rotated', async () => {
    const { sim } = await setup();
    const record = sim.state.findKey(sim.apiKey)!;
    let key = sim.apiKey;
    const client = new GatewayClient({ baseUrl: sim.baseUrl, apiKey: () => key, timeoutMs: 2000 });
    record.enabled = false;
    // A status check waiting out a 429 hold when the key is refused goes nowhere after its wait either.
    client.holds.hold('status', 300);
    const waiting = client.getJob('vid_x').catch((e: unknown) => e);
    const first = await client.submit(request, 'k').catch((e: unknown) => e);
    const later = await Promise.all(
      Array.from({ length: 8 }, () => client.submit(request, 'k').catch((e: unknown) => e)),
    );
    const results = [first, await waiting, ...later];
    expect(
      results.filter((e) => e instanceof PermissionDeniedError && !(e instanceof KeyRefusedError)).length,
    ).toBe(1);
    const local = results.filter((e) => e instanceof KeyRefusedError);
    expect(local.length).toBe(9);
    expect((local[0] as KeyRefusedError).status).toBe(403);
    expect((local[0] as KeyRefusedError).outcomeUnknown).toBe(false);
    expect((local[0] as Error).message).not.toContain(sim.apiKey);
    expect(sim.stats().requestsWithDisabledKey[record.id]).toBeLessThanOrEqual(2);
    const sentBefore = sim.stats().requestsWithDisabledKey[record.id] ?? 0;
    // Still refused later, with no unblock: nothing goes out.
    await expect(client.getJob('vid_x')).rejects.toBeInstanceOf(KeyRefusedError);
    await expect(client.getJob('vid_x', { unblockedAt: Date.now() - 60_000 })).rejects.toBeInstanceOf(
      KeyRefusedError,
    );
    expect(sim.stats().requestsWithDisabledKey[record.id]).toBe(sentBefore);
    // A resume (unblocked after the refusal) sends one call; the key is still disabled: refused again.
    await expect(client.getJob('vid_x', { unblockedAt: Date.now() + 1 })).rejects.toBeInstanceOf(
      PermissionDeniedError,
    );
    expect(sim.stats().requestsWithDisabledKey[record.id]).toBe(sentBefore + 1);
    await expect(client.getJob('vid_x')).rejects.toBeInstanceOf(KeyRefusedError);
    // A new key (a rotated key file) lifts the refusal at once.
    key = sim.state.createKey('rotated').key;
    expect((await client.submit(request, 'k2')).id).toMatch(/^vid_/);
    expect(sim.stats().requestsWithDisabledKey[record.id]).toBe(sentBefore + 1);
  });
});

describe('a stopping worker sends nothing new', () => {
  it('lets a call on the wire finish, and refuses calls waiting out a hold, later calls and a submit about to send', async () => {
    const { sim, client } = await setup({ faults: { slow: 1, slowMs: 300, scope: 'submit' } });
    const sent = () => sim.stats().requests['POST /v1/videos/generations']?.[200] ?? 0;
    // A 429 earlier held this worker's submissions for 2 s: one call goes out before it (slow: its answer comes
    // 300 ms later), four wait out the hold.
    const first = client.submit(request, 'k0').catch((e: unknown) => e);
    client.holds.hold('submit', 2000);
    const calls = [
      first,
      ...Array.from({ length: 4 }, (_, i) => client.submit(request, `k${i + 1}`).catch((e: unknown) => e)),
    ];
    await new Promise((r) => setTimeout(r, 50));
    client.stop();
    const results = await Promise.all(calls);
    const jobs = results.filter((r) => !(r instanceof Error));
    expect(jobs).toHaveLength(1); // the one on the wire got its answer
    const refused = results.filter((r) => r instanceof WorkerStoppingError);
    expect(refused).toHaveLength(4);
    expect(refused[0]).toBeInstanceOf(NotSentError); // nothing sent: a benign "come back later"
    expect((refused[0] as Error).message).toContain('this worker is stopping');
    expect(sim.stats().jobsCreated).toBe(1);
    await expect(client.getJob('vid_x')).rejects.toBeInstanceOf(WorkerStoppingError);
    await expect(client.submit(request, 'k9')).rejects.toBeInstanceOf(WorkerStoppingError);
    expect(sent()).toBe(1);
    expect(Object.keys(sim.stats().requests).filter((r) => r.startsWith('GET '))).toEqual([]);

    // A stop while a submit records that it is sending (beforeSend): not sent, and known not sent.
    const other = new GatewayClient({ baseUrl: sim.baseUrl, apiKey: () => sim.apiKey, timeoutMs: 2000 });
    const err = await other
      .submit(request, 'k10', { beforeSend: () => other.stop() })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionError);
    expect((err as ConnectionError).outcomeUnknown).toBe(false);
    expect(sim.stats().jobsCreated).toBe(1);
  });
});
