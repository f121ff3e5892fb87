// Result URLs that expire, from the command line: the real `vidbatch` (spawned) against this test's Temporal
// server, worker and simulator. With the defaults every paid video is on disk before its URL expires; a URL
// that expired before its download is asked for again through the job (a fresh one when the gateway signs
// one), else the row ends `url_expired` with its job id, and `vidbatch download` fetches it later. The
// simulator's counters prove that nothing was paid twice.
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { readManifest } from '../../src/results/manifest';
import { vidbatch, manifestPathOf } from './cli-helpers';
import { cliSettings, testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
let proxy: Server | undefined;
afterEach(async () => {
  proxy?.close();
  proxy = undefined;
  await env?.close();
  env = undefined;
});

const FAST = ['--first-poll', '0.5', '--poll-interval', '0.3', '--poll-cap', '1', '--no-adaptive-poll'];

const manifestOf = manifestPathOf;

/** `n` rows, each prompt tagged so this test's batch id is its own. */
async function csv(path: string, n: number): Promise<void> {
  const tag = randomUUID().slice(0, 8);
  const rows = Array.from({ length: n }, (_, i) => `r${i + 1},a harbour at dawn ${i + 1} ${tag},720P,5`);
  await writeFile(path, ['id,prompt,resolution,duration', ...rows].join('\n') + '\n');
}

/** The prompts of the manifest's batch, and how many downloadVideo activities their histories hold. */
async function activitiesRun(
  env: TestEnv,
  manifest: string,
): Promise<{ prompts: number; downloads: number }> {
  const batchId = basename(dirname(manifest));
  let prompts = 0;
  let downloads = 0;
  for await (const wf of env.client.workflow.list({
    query: `BatchId = '${batchId}' AND WorkflowType = 'promptWorkflow'`,
  })) {
    prompts += 1;
    const { events } = await env.client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
    for (const event of events ?? [])
      if (event.activityTaskScheduledEventAttributes?.activityType?.name === 'downloadVideo') downloads += 1;
  }
  return { prompts, downloads };
}

const sha256 = async (file: string) =>
  createHash('sha256')
    .update(await readFile(file))
    .digest('hex');

/**
 * A slow link between the worker and the gateway: the first answer that reports a job `completed` reaches
 * the worker `holdMs` late, after the URL in it has expired; every other answer passes at once. Returns the
 * base URL (ending in /v1) to give the worker.
 */
async function slowCompletedAnswers(origin: string, holdMs: number): Promise<string> {
  const held = new Set<string>();
  proxy = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const headers: Record<string, string> = {};
      for (const name of ['authorization', 'content-type', 'idempotency-key'])
        if (typeof req.headers[name] === 'string') headers[name] = req.headers[name];
      const upstream = await fetch(`${origin}${req.url}`, {
        method: req.method,
        headers,
        ...(chunks.length ? { body: Buffer.concat(chunks) } : {}),
      });
      const body = await upstream.text();
      if (req.method === 'GET') {
        const job = (() => {
          try {
            return JSON.parse(body) as { id?: string; status?: string };
          } catch {
            return {};
          }
        })();
        if (job.status === 'completed' && job.id && !held.has(job.id)) {
          held.add(job.id);
          await sleep(holdMs);
        }
      }
      const out: Record<string, string> = {};
      for (const name of ['content-type', 'retry-after', 'x-request-id']) {
        const value = upstream.headers.get(name);
        if (value) out[name] = value;
      }
      res.writeHead(upstream.status, out);
      res.end(body);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((r) => proxy!.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/v1`;
}

describe('result URLs that expire, from the command line', () => {
  it('URLs expiring 30 s after completion: `run` with the defaults leaves every video on disk, verified', async () => {
    env = await testEnv({ jobSeconds: 1, jobJitterSeconds: 0.3, urlTtlSeconds: 30 });
    await env.startWorker();
    await csv(join(env.dir, 'x.csv'), 12);
    const r = await vidbatch(['run', 'x.csv', ...FAST], { cwd: env.dir, env: cliSettings(env) });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('12 succeeded, 0 failed of 12');
    expect(r.stdout).toContain('verified: 12 ok, 0 mismatched');
    const manifest = manifestOf(r);
    const rows = await readManifest(manifest);
    expect(rows).toHaveLength(12);
    for (const row of rows) {
      // Beside the manifest, as <row-id>.mp4, the hash in the manifest that of the file on disk.
      expect(row).toMatchObject({ status: 'succeeded', file: join(dirname(manifest), `${row.rowId}.mp4`) });
      expect(row.downloadError).toBeUndefined();
      expect(row.verification).toMatchObject({ ok: true, height: 720 });
      expect(await sha256(row.file!)).toBe(row.sha256);
    }
    const afterRun = env.sim.stats();
    expect(afterRun).toMatchObject({ jobsCreated: 12, expiredUrlRequests: 0 });
    expect(afterRun.videosServed).toBe(12);
    // Each video came with the status check that found its job finished: no prompt ran a download activity.
    expect(await activitiesRun(env, manifest)).toEqual({ prompts: 12, downloads: 0 });

    // `download` after the URLs would have expired finds every file the run kept: nothing fetched, no failure.
    const download = await vidbatch(['download', 'x.csv'], { cwd: env.dir, env: cliSettings(env) });
    expect(download.code, download.stdout + download.stderr).toBe(0);
    expect(download.stdout).toContain('12 videos on disk, verified: 12 already there, 0 fetched');
    const status = await vidbatch(['status', 'x.csv'], { cwd: env.dir, env: cliSettings(env) });
    expect(status.stdout).toContain('verified: 12 ok, 0 mismatched');
    expect(status.stdout).not.toContain('provider URLs expire');
    const stats = env.sim.stats();
    console.log('expiring URLs, defaults:', {
      jobsCreated: stats.jobsCreated,
      videosServed: stats.videosServed,
      expiredUrlRequests: stats.expiredUrlRequests,
    });
    expect(stats.videosServed).toBe(12);
    expect(stats.jobsCreated).toBe(12);
  });

  it('a URL expired before its download is asked for again through the job, and the fresh URL works', async () => {
    env = await testEnv({ jobSeconds: 1, jobJitterSeconds: 0.3, urlTtlSeconds: 1, freshUrlOnCheck: true });
    await env.startWorker({ baseUrl: await slowCompletedAnswers(env.sim.origin, 1500), timeoutMs: 5000 });
    await csv(join(env.dir, 'f.csv'), 4);
    const r = await vidbatch(['run', 'f.csv', ...FAST], { cwd: env.dir, env: cliSettings(env) });
    const stats = env.sim.stats();
    console.log('expired before download, fresh URL on check:', {
      exit: r.code,
      jobsCreated: stats.jobsCreated,
      expiredUrlRequests: stats.expiredUrlRequests,
      freshUrlsIssued: stats.freshUrlsIssued,
      videosServed: stats.videosServed,
    });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('4 succeeded, 0 failed of 4');
    const rows = await readManifest(manifestOf(r));
    for (const row of rows) {
      expect(row.status).toBe('succeeded');
      expect(row.verification).toMatchObject({ ok: true });
      expect(await sha256(row.file!)).toBe(row.sha256);
      // The URL recorded is the fresh one that served the video.
      expect(row.url).toMatch(/\/files\/t[0-9a-f]{16}\//);
    }
    // Each row: its first URL answered 403 once, its job gave a fresh one; nothing was paid twice.
    expect(stats.jobsCreated).toBe(4);
    expect(stats.expiredUrlRequests).toBe(4);
    expect(stats.freshUrlsIssued).toBeGreaterThanOrEqual(4);
    expect(stats.videosServed).toBe(4);
  });

  it('without a fresh URL the row ends url_expired with its job id; a re-run pays nothing; `download` fetches it later', async () => {
    env = await testEnv({ jobSeconds: 1, jobJitterSeconds: 0.3, urlTtlSeconds: 1 });
    await env.startWorker({ baseUrl: await slowCompletedAnswers(env.sim.origin, 1500), timeoutMs: 5000 });
    await csv(join(env.dir, 'e.csv'), 4);
    const r = await vidbatch(['run', 'e.csv', ...FAST], { cwd: env.dir, env: cliSettings(env) });
    // Failed rows: exit 3, as for any failed row.
    expect(r.code, r.stdout + r.stderr).toBe(3);
    expect(r.stdout).toContain('0 succeeded, 4 failed of 4');
    expect(r.stdout).toContain('4 videos not on disk');
    const manifest = manifestOf(r);
    const rows = await readManifest(manifest);
    for (const row of rows) {
      expect(row).toMatchObject({ status: 'failed', errorCode: 'url_expired' });
      expect(row.jobId).toMatch(/^vid_/);
      expect(row.errorMessage).toContain('HTTP 403');
      expect(row.errorMessage).toContain('the job gave the same URL');
      expect(row.file).toBeUndefined();
    }
    const afterRun = env.sim.stats();
    expect(afterRun.jobsCreated).toBe(4);
    // One 403 per row: the check gave the same URL, which is not tried again.
    expect(afterRun.expiredUrlRequests).toBe(4);

    const again = await vidbatch(['run', 'e.csv', ...FAST], { cwd: env.dir, env: cliSettings(env) });
    expect(again.code).toBe(3);
    expect(env.sim.stats().jobsCreated).toBe(4);

    // The gateway signs fresh URLs now: `download` asks each job again and keeps the video.
    env.sim.setOptions({ freshUrlOnCheck: true });
    const download = await vidbatch(['download', 'e.csv'], { cwd: env.dir, env: cliSettings(env) });
    expect(download.code, download.stdout + download.stderr).toBe(0);
    expect(download.stdout).toContain('4 videos on disk, verified: 0 already there, 4 fetched');
    expect(download.stdout).toContain('(4 through a fresh URL from its job)');
    for (const row of await readManifest(manifest)) {
      expect(row).toMatchObject({ status: 'succeeded', file: join(dirname(manifest), `${row.rowId}.mp4`) });
      expect(row.errorCode).toBeUndefined();
      expect(await sha256(row.file!)).toBe(row.sha256);
    }
    // status, results and the gallery read the same record.
    const status = await vidbatch(['status', 'e.csv'], { cwd: env.dir, env: cliSettings(env) });
    expect(status.stdout).toContain('verified: 4 ok, 0 mismatched');
    const results = await vidbatch(['results', 'e.csv'], { cwd: env.dir, env: cliSettings(env) });
    expect(results.stdout).toContain('4 succeeded, 0 failed');
    const review = await vidbatch(['review', 'e.csv'], { cwd: env.dir, env: cliSettings(env) });
    expect(review.code, review.stdout + review.stderr).toBe(0);
    const page = await readFile(join(dirname(manifest), 'review.html'), 'utf8');
    expect(page).toContain('"src":"r1.mp4","local":true');
    const stats = env.sim.stats();
    console.log('expired, no fresh URL, then download:', {
      jobsCreated: stats.jobsCreated,
      expiredUrlRequests: stats.expiredUrlRequests,
      freshUrlsIssued: stats.freshUrlsIssued,
      videosServed: stats.videosServed,
    });
    expect(stats.jobsCreated).toBe(4);
  });
});
