import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { loadGatewaySettings } from '../../src/config';
import { ConfigError } from '../../src/errors';
import {
  AuthenticationError,
  BadRequestError,
  ConnectionError,
  MalformedResponseError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  ServerError,
  TimeoutError,
} from '../../src/gateway/errors';
import { GatewayClient } from '../../src/gateway/client';
import { parseRetryAfter } from '../../src/gateway/retry-after';
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

  it('parses Retry-After (seconds and date) and holds every call of the worker until then', async () => {
    for (const retryAfterFormat of ['seconds', 'date'] as const) {
      const { client } = await setup({ rateLimit: 1, burst: 1, retryAfterFormat });
      await client.listModels();
      const error = await client.listModels().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RateLimitError);
      const wait = (error as RateLimitError).retryAfterMs ?? 0;
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(2000);
      const hold = client.pacer.snapshot().holdMs;
      expect(hold).toBeGreaterThan(0);
      const started = Date.now();
      await client.listModels(); // waits out the hold in the pacer, then goes through
      expect(Date.now() - started).toBeGreaterThanOrEqual(hold - 50);
    }
  });

  it('maps undocumented status values to unknown instead of failing', async () => {
    const { client } = await setup({ jobSeconds: 5, faults: { unknownStatus: 1 } });
    const { id } = await client.submit(request, 'k');
    expect(await client.getJob(id)).toMatchObject({ status: 'unknown', rawStatus: 'warming_up' });
  });

  it('never puts the API key into error text, even when the gateway echoes it', async () => {
    const secret = 'sk-very-secret-key-123';
    const server = createServer((req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ error: { code: 'oops', message: `bad header ${req.headers.authorization}` } }),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const client = new GatewayClient({
      baseUrl: `http://127.0.0.1:${port}/v1`,
      apiKey: () => secret,
      timeoutMs: 1000,
    });
    const error = (await client.listModels().catch((e: unknown) => e)) as Error;
    server.close();
    expect(error).toBeInstanceOf(ServerError);
    expect(error.message).toContain('[redacted]');
    expect(JSON.stringify({ m: error.message, s: error.stack })).not.toContain(secret);
  });
});
