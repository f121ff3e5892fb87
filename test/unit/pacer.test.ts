import { afterEach, describe, expect, it } from 'vitest';
import { PacerBusyError } from '../../src/gateway/errors';
import { GatewayClient } from '../../src/gateway/client';
import { RequestPacer } from '../../src/gateway/pacer';
import { startSimulator, type Simulator } from '../../src/simulator/server';

const sims: Simulator[] = [];
afterEach(async () => {
  while (sims.length) await sims.pop()?.close();
});

describe('RequestPacer', () => {
  it('sends submissions before status checks that queued earlier', async () => {
    const pacer = new RequestPacer({ initialRate: 20 });
    const order: string[] = [];
    await pacer.acquire('status', Infinity); // takes the only token: the rest must queue
    const calls = [
      ...['s1', 's2', 's3'].map((id) => pacer.acquire('status', Infinity).then(() => order.push(id))),
      ...['p1', 'p2'].map((id) => pacer.acquire('submit', Infinity).then(() => order.push(id))),
    ];
    await Promise.all(calls);
    expect(order).toEqual(['p1', 'p2', 's1', 's2', 's3']);
  });

  it('turns a wait longer than the caller can afford into PacerBusyError with spread-out return times', async () => {
    const pacer = new RequestPacer({ initialRate: 2 });
    await pacer.acquire('submit', Infinity);
    const queued = pacer.acquire('submit', 5000); // ~0.5 s: fits
    const bounced = await Promise.all(
      [1, 2, 3].map(() =>
        pacer.acquire('submit', 100).then(
          () => undefined,
          (e: unknown) => e,
        ),
      ),
    );
    for (const e of bounced) expect(e).toBeInstanceOf(PacerBusyError);
    const delays = bounced.map((e) => (e as PacerBusyError).retryAfterMs);
    expect(delays[0]).toBeGreaterThan(500);
    // Callers turned away are spread out: each is counted in the wait of the next (1 / rate apart, ±10%).
    expect(delays[2]! - delays[0]!).toBeGreaterThanOrEqual(600);
    expect(Math.max(...delays)).toBeLessThanOrEqual(5000);
    await queued;
  });

  it('holds every call for Retry-After and never shortens a hold', async () => {
    const pacer = new RequestPacer({ initialRate: 100 });
    pacer.rateLimited(600);
    pacer.rateLimited(100);
    expect(pacer.snapshot().holdMs).toBeGreaterThan(500);
    const started = Date.now();
    await pacer.acquire('status', Infinity);
    expect(Date.now() - started).toBeGreaterThanOrEqual(550);
  });

  it('finds an unpublished rate limit over real HTTP with few 429s, then keeps just under it', async () => {
    const limit = 20;
    const sim = await startSimulator({ rateLimit: limit, burst: limit, jobSeconds: 1 });
    sims.push(sim);
    const client = new GatewayClient({ baseUrl: sim.baseUrl, apiKey: () => sim.apiKey, timeoutMs: 5000 });
    let rateLimited = 0;
    const call = async (): Promise<void> => {
      for (;;) {
        try {
          await client.listModels();
          return;
        } catch {
          rateLimited += 1; // the pacer already holds every call for Retry-After
        }
      }
    };
    const started = Date.now();
    await Promise.all(Array.from({ length: 400 }, call));
    const seconds = (Date.now() - started) / 1000;
    const { ceiling, rate } = client.pacer.snapshot();
    // 400 calls at 20/s need 19 s after the 20-token burst; slow start and a few holds cost a few more.
    expect(rateLimited).toBeLessThanOrEqual(8);
    expect(seconds).toBeLessThan(30);
    expect(ceiling).toBeGreaterThan(limit * 0.8);
    expect(ceiling).toBeLessThan(limit * 1.6);
    expect(rate).toBeGreaterThan(limit * 0.5);
    expect(sim.stats().rateLimited).toBe(rateLimited);
  }, 60_000);
});
