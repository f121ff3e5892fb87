// The simulator as hostile as the spec allows to result URLs and error pages, over real HTTP: result URLs
// that answer 302 (one hop or a chain), URLs that expire (403) with or without a fresh URL on the next status
// check, and a proxy's 500 page that prints the request's headers, Authorization included.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { downloadVerified, looksLikeMp4 } from '../../src/results/download';
import { AUTHORIZATION_AT } from '../../src/simulator/header-echo';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/server';

const sims: Simulator[] = [];
afterEach(async () => {
  while (sims.length) await sims.pop()?.close();
});

/** A simulator on a clock the test moves (`clock.t`), so expiry needs no sleeping. */
async function sim(options: SimulatorOptions = {}) {
  const clock = { t: Date.parse('2026-01-01T00:00:00Z') };
  const s = await startSimulator({ jobSeconds: 1, now: () => clock.t, ...options });
  sims.push(s);
  return { s, clock };
}

const headersOf = (s: Simulator, extra: Record<string, string> = {}) => ({
  'content-type': 'application/json',
  authorization: `Bearer ${s.apiKey}`,
  ...extra,
});

async function submit(s: Simulator, extra: Record<string, string> = {}) {
  return fetch(`${s.baseUrl}/videos/generations`, {
    method: 'POST',
    headers: headersOf(s, extra),
    body: JSON.stringify({ model: 'modelfamily-1.0-r2v', input: { prompt: 'a red fox' } }),
  });
}

/** A status check of a job; its URL when completed. */
async function urlOf(s: Simulator, id: string): Promise<string> {
  const res = await fetch(`${s.baseUrl}/videos/generations/${id}`, { headers: headersOf(s) });
  const job = (await res.json()) as { status: string; data?: { url: string }[] };
  expect(job.status).toBe('completed');
  return job.data![0]!.url;
}

/** A finished job's id (the clock moved past its end). */
async function finishedJob(s: Simulator, clock: { t: number }): Promise<string> {
  const { id } = (await (await submit(s)).json()) as { id: string };
  clock.t += 2000;
  return id;
}

describe('simulator: result URLs that redirect', () => {
  it('answers 302 to /cdn/... down a 2-hop chain, then the video; counts the redirects', async () => {
    const { s, clock } = await sim({ redirectResults: 2 });
    const url = await urlOf(s, await finishedJob(s, clock));
    const first = await fetch(url, { redirect: 'manual' });
    expect(first.status).toBe(302);
    const hop = first.headers.get('location')!;
    expect(hop).toMatch(/^\/cdn\/hop1\/vid_\w+\.mp4$/);
    const second = await fetch(new URL(hop, url), { redirect: 'manual' });
    expect(second.status).toBe(302);
    const last = second.headers.get('location')!;
    expect(last).toMatch(/^\/cdn\/vid_\w+\.mp4$/);
    const video = await fetch(new URL(last, url), { redirect: 'manual' });
    expect(video.status).toBe(200);
    expect(video.headers.get('content-type')).toBe('video/mp4');
    expect(looksLikeMp4(new Uint8Array(await video.arrayBuffer()))).toBe(true);
    expect(s.stats()).toMatchObject({ redirectsServed: 2, videosServed: 1 });
    expect(s.stats().requests).toMatchObject({
      'GET /files/{file}': { 302: 1 },
      'GET /cdn/{file}': { 302: 1, 200: 1 },
    });

    // vidbatch's downloader follows the chain to a verified file.
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-sim-redirect-'));
    const got = await downloadVerified(url, dir, 'x.mp4');
    expect(got.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(s.stats().redirectsServed).toBe(4);
  });

  it('takes redirectResults at runtime (true is one hop) and refuses more than 5 hops', async () => {
    const { s, clock } = await sim();
    const url = await urlOf(s, await finishedJob(s, clock));
    expect((await fetch(url, { redirect: 'manual' })).status).toBe(200);
    const set = (body: unknown) =>
      fetch(`${s.origin}/admin/options`, { method: 'POST', body: JSON.stringify(body) });
    expect((await set({ redirectResults: true })).status).toBe(200);
    const one = await fetch(url, { redirect: 'manual' });
    expect(one.status).toBe(302);
    expect(one.headers.get('location')).toMatch(/^\/cdn\/vid_\w+\.mp4$/);
    expect(s.state.options.redirectResults).toBe(1);
    expect((await set({ redirectResults: 6 })).status).toBe(400);
    expect((await set({ redirectResults: false })).status).toBe(200);
    expect((await fetch(url, { redirect: 'manual' })).status).toBe(200);
  });
});

describe('simulator: result URLs that expire', () => {
  it('answers 403 (an object store\'s "Request has expired") once the TTL passed; the status keeps the expired URL', async () => {
    const { s, clock } = await sim({ urlTtlSeconds: 10 });
    const id = await finishedJob(s, clock);
    const url = await urlOf(s, id);
    expect(url).toMatch(/\/files\/vid_\w+\.mp4\?expires=\d+$/);
    expect((await fetch(url)).status).toBe(200);
    clock.t += 10_000;
    const expired = await fetch(url);
    expect(expired.status).toBe(403);
    expect(expired.headers.get('content-type')).toBe('application/xml');
    expect(await expired.text()).toContain('Request has expired');
    // Without freshUrlOnCheck the gateway answers the same, dead URL.
    expect(await urlOf(s, id)).toBe(url);
    expect(s.stats()).toMatchObject({ expiredUrlRequests: 1, freshUrlsIssued: 0 });
  });

  it('with freshUrlOnCheck, a status check after expiry gives a new, working URL (a new token in its path)', async () => {
    const { s, clock } = await sim({ urlTtlSeconds: 10, freshUrlOnCheck: true, redirectResults: 1 });
    const id = await finishedJob(s, clock);
    const first = await urlOf(s, id);
    // Not yet expired: the same URL.
    clock.t += 5000;
    expect(await urlOf(s, id)).toBe(first);
    clock.t += 6000;
    // Expired URLs answer 403 at the first hop; the redirect is not even sent.
    expect((await fetch(first, { redirect: 'manual' })).status).toBe(403);
    const fresh = await urlOf(s, id);
    expect(fresh).not.toBe(first);
    expect(fresh).toMatch(new RegExp(`/files/t[0-9a-f]{16}/${id}\\.mp4\\?expires=${clock.t + 10_000}$`));
    const video = await fetch(fresh);
    expect(video.status).toBe(200);
    expect(looksLikeMp4(new Uint8Array(await video.arrayBuffer()))).toBe(true);
    expect((await fetch(first)).status).toBe(403);
    // A token the job never had is no URL of it.
    expect((await fetch(fresh.replace(/\/t[0-9a-f]{16}\//, '/t0000000000000000/'))).status).toBe(404);
    expect(await urlOf(s, id)).toBe(fresh);
    clock.t += 10_001;
    expect((await fetch(fresh)).status).toBe(403);
    const third = await urlOf(s, id);
    expect(third).not.toBe(fresh);
    expect((await fetch(third)).status).toBe(200);
    expect(s.stats()).toMatchObject({ freshUrlsIssued: 2, expiredUrlRequests: 3 });
  });
});

describe('simulator: a 500 page that echoes the request headers', () => {
  it('answers text/html printing the headers verbatim, the key near character 191, after the job was made', async () => {
    const { s } = await sim({ faults: { echoHeaders500: 1, scope: 'submit' } });
    const res = await submit(s, { 'X-Trace': 'Abc 123' });
    expect(res.status).toBe(500);
    expect(res.headers.get('content-type')).toBe('text/html');
    const page = await res.text();
    expect(page).toContain(`authorization: Bearer ${s.apiKey}\n`);
    expect(page).toMatch(/\nX-Trace: Abc 123\n/); // names as sent: verbatim
    expect(page).toContain('POST /v1/videos/generations');
    expect(page.indexOf('authorization: Bearer')).toBe(AUTHORIZATION_AT);
    // What a client cutting at 200 characters before redacting would keep: 9 characters of the secret.
    const secret = s.apiKey.slice('sk-'.length);
    expect(page.slice(0, 200)).toContain(secret.slice(0, 9));
    // The proxy failed after the gateway made (and billed) the job: an ambiguous submit.
    expect(s.stats()).toMatchObject({
      jobsCreated: 1,
      headerEchoPages: 1,
      faultsInjected: { echoHeaders500: 1 },
      ambiguousSubmits: { echoHeaders500: 1 },
    });
    // Scoped to submits: status checks answer normally.
    const [id] = s.state.jobs.keys();
    expect((await fetch(`${s.baseUrl}/videos/generations/${id}`, { headers: headersOf(s) })).status).toBe(
      200,
    );
  });

  it('keeps the offset with a long request line, and takes the fault at runtime', async () => {
    const { s } = await sim();
    s.setFaults({ echoHeaders500: 1 });
    const res = await fetch(`${s.baseUrl}/videos/generations/${'x'.repeat(60)}`, { headers: headersOf(s) });
    // A status check of an unknown job is a 404 before the answer faults are rolled.
    expect(res.status).toBe(404);
    const models = await fetch(`${s.baseUrl}/models?${'q'.repeat(40)}=1`, { headers: headersOf(s) });
    expect(models.status).toBe(500);
    const page = await models.text();
    expect(page.indexOf('authorization: Bearer')).toBe(AUTHORIZATION_AT);
    expect(() => s.setFaults({ echoHeaders500: 2 })).toThrow(/echoHeaders500/);
  });
});
