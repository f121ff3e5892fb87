// The baseline: the plain Node script a user would write without Temporal. A promise pool submits, polls
// with setTimeout, and retries a 429 after Retry-After. No durability, no idempotency, no shared gate.
import { parseRetryAfter } from '../src/gateway/retry-after';

export interface NaiveOptions {
  baseUrl: string;
  apiKey: string;
  prompts: string[];
  concurrency?: number;
  pollMs?: number;
}

export interface NaiveResult {
  makespanMs: number;
  succeeded: number;
  failed: number;
  rateLimited: number;
  requests: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runNaivePeer({
  baseUrl,
  apiKey,
  prompts,
  concurrency = 20,
  pollMs = 5000,
}: NaiveOptions): Promise<NaiveResult> {
  const started = Date.now();
  const result: NaiveResult = { makespanMs: 0, succeeded: 0, failed: 0, rateLimited: 0, requests: 0 };
  const call = async (path: string, init: RequestInit = {}): Promise<Record<string, unknown>> => {
    for (;;) {
      result.requests += 1;
      const res = await fetch(`${baseUrl}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      });
      if (res.status === 429) {
        result.rateLimited += 1;
        await res.arrayBuffer();
        await sleep(parseRetryAfter(res.headers.get('retry-after')) ?? 1000);
        continue;
      }
      return (await res.json()) as Record<string, unknown>;
    }
  };
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < prompts.length; i = next++) {
      const job = await call('/videos/generations', {
        method: 'POST',
        body: JSON.stringify({
          model: 'modelfamily-1.0-r2v',
          input: { prompt: prompts[i] },
          parameters: { resolution: '720P', duration: 5 },
        }),
      });
      for (;;) {
        await sleep(pollMs);
        const state = await call(`/videos/generations/${String(job.id)}`);
        if (state.status === 'completed') {
          result.succeeded += 1;
          break;
        }
        if (state.status === 'failed') {
          result.failed += 1;
          break;
        }
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  result.makespanMs = Date.now() - started;
  return result;
}
