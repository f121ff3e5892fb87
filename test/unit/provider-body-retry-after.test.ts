// A 429 whose wait is only in its body: Replicate's rate-limit reference words it in `detail` ("resets in
// ~30s") and names no header; fal's names no wait at all. The adapter reads the body's wait, and the transport
// uses it only when the answer has no Retry-After. Against a bare HTTP server, so the header can be left out.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { loadGatewaySettings } from '../../src/config';
import { GatewayClient } from '../../src/gateway/client';
import { RateLimitError } from '../../src/gateway/errors';
import { fal } from '../../src/gateway/providers/fal';
import { replicate } from '../../src/gateway/providers/replicate';
import { MAX_RETRY_AFTER_MS } from '../../src/gateway/retry-after';

let server: Server | undefined;
afterEach(async () => {
  await new Promise((r) => server?.close(r) ?? r(undefined));
  server = undefined;
});

/** A server answering every request 429 with this body and headers; its origin. */
async function throttling(body: unknown, headers: Record<string, string> = {}): Promise<string> {
  server = createServer((_req, res) => {
    res.writeHead(429, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The RateLimitError a status check meets on `provider` at `baseUrl`. */
async function refusal(provider: string, baseUrl: string): Promise<RateLimitError> {
  const client = new GatewayClient(
    loadGatewaySettings({
      GATEWAY_PROVIDER: provider,
      GATEWAY_BASE_URL: baseUrl,
      GATEWAY_API_KEY: 'r8_test',
      GATEWAY_TIMEOUT_MS: '2000',
    }),
  );
  const error = await client.getJob('abc').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(RateLimitError);
  return error as RateLimitError;
}

describe("Replicate's 429 body", () => {
  it('reads the wait its detail words, in both forms the reference has shown', () => {
    const read = replicate.readRetryAfter!;
    expect(read({ detail: 'Request was throttled. Your rate limit resets in ~30s.' })).toBe(30_000);
    expect(read({ detail: 'Request was throttled. Expected available in 1 second.' })).toBe(1000);
    expect(read({ detail: 'Request was throttled. Expected available in 12 seconds.' })).toBe(12_000);
    expect(read({ detail: 'Request was throttled. Your rate limit resets in ~2m.' })).toBe(120_000);
    expect(read({ detail: 'Request was throttled. Your rate limit resets in ~500ms.' })).toBe(500);
    // No wait in the words, or not the error shape: the transport's default.
    expect(read({ detail: 'Request was throttled.' })).toBeUndefined();
    expect(read({ title: 'Too many requests' })).toBeUndefined();
    expect(read('resets in ~30s')).toBeUndefined();
    expect(read(undefined)).toBeUndefined();
  });

  it('the transport holds for the body wait when no Retry-After came', async () => {
    const origin = await throttling({ detail: 'Request was throttled. Your rate limit resets in ~30s.' });
    const error = await refusal('replicate', `${origin}/v1`);
    expect(error.retryAfterMs).toBe(30_000);
    expect(error.message).toContain('resets in ~30s');
  });

  it('a Retry-After header wins over the body', async () => {
    const origin = await throttling(
      { detail: 'Request was throttled. Your rate limit resets in ~30s.' },
      { 'retry-after': '7' },
    );
    expect((await refusal('replicate', `${origin}/v1`)).retryAfterMs).toBe(7000);
  });

  it('a body wait past the cap is clamped as a header would be', async () => {
    const origin = await throttling({ detail: 'Your rate limit resets in ~9000m.' });
    const error = await refusal('replicate', `${origin}/v1`);
    expect(error.retryAfterMs).toBe(MAX_RETRY_AFTER_MS);
    expect(error.clampedFromMs).toBe(9000 * 60_000);
  });
});

describe("fal's 429", () => {
  it('has no body wait to read: without Retry-After the default wait applies', async () => {
    expect(fal.readRetryAfter).toBeUndefined();
    const origin = await throttling({ detail: 'Rate limit exceeded' });
    expect((await refusal('fal', origin)).retryAfterMs).toBeUndefined();
  });
});
