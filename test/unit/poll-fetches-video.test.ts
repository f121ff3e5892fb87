// The status check that finds a job completed fetches its video in the same attempt, when that fits in what is
// left of the attempt: the video on disk, or a failure no retry changes (the URL answered 410); any other
// failure leaves the video to the download activity, and so do a spare check and an attempt with too little
// time left. Over real HTTP: a stand-in gateway answers the job completed, with a URL on a file server whose
// answers the test chooses.
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobActivities, type PollInput } from '../../src/activities/jobs';
import { DEFAULT_BATCH_OPTIONS } from '../../src/contract/batch-options';
import type { PollOutcome } from '../../src/contract/jobs';
import { GatewayClient } from '../../src/gateway/client';
import { videoBytes } from '../../src/simulator/video-faults';

const video = videoBytes({ id: 'vid_1', resolution: '720P', duration: 5 });
/** What the file server answers per path: a status, or the video. */
const files: Record<string, number> = {
  '/ok.mp4': 200,
  '/gone.mp4': 410,
  '/busy.mp4': 503,
  '/late.mp4': 200,
};
const requests: string[] = [];
let server: Server;
let origin: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = req.url ?? '';
    if (url.startsWith('/v1/videos/generations/')) {
      // The job id is the file's name: GET /v1/videos/generations/ok -> /ok.mp4.
      const id = url.split('/').at(-1)!;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id, status: 'completed', data: [{ url: `${origin}/${id}.mp4` }] }));
      return;
    }
    requests.push(url);
    const status = files[url] ?? 404;
    if (status !== 200) {
      res.writeHead(status);
      res.end('no');
      return;
    }
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(video.length) });
    res.end(video);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server.close());

async function poll(jobId: string, { startToCloseTimeoutMs = 30_000, spare = false } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'vidbatch-inline-'));
  const gateway = new GatewayClient({ baseUrl: `${origin}/v1`, apiKey: () => 'sk-test', timeoutMs: 5_000 });
  const activities = createJobActivities(gateway, dir);
  const input: PollInput = {
    jobId,
    submittedAt: Date.now() - 60_000,
    poll: DEFAULT_BATCH_OPTIONS.poll,
    checkNow: true,
    ...(spare ? { spare } : {}),
    download: { batchId: 'batch-1', name: `${jobId}.mp4`, parameters: { resolution: '720P', duration: 5 } },
  };
  const env = new MockActivityEnvironment({ startToCloseTimeoutMs });
  const outcome: PollOutcome = await env.run((i: PollInput) => activities.pollJob(i), input);
  return { dir, outcome };
}

describe('the check that finds a job completed fetches its video', () => {
  it('keeps the video, verified, with the outcome', async () => {
    const { dir, outcome } = await poll('ok');
    expect(outcome).toMatchObject({ status: 'succeeded', url: `${origin}/ok.mp4` });
    expect(outcome.download).toMatchObject({ ok: true, video: { bytes: video.length } });
    const file = join(dir, 'batch-1', 'ok.mp4');
    if (!outcome.download?.ok) throw new Error('not fetched');
    expect(outcome.download.video.file).toBe(file);
    expect(outcome.download.video.verification).toMatchObject({ ok: true, height: 720 });
    expect(
      createHash('sha256')
        .update(await readFile(file))
        .digest('hex'),
    ).toBe(outcome.download.video.sha256);
  });

  it('returns an expired URL as a failure of its own (no retry can change it)', async () => {
    const { outcome } = await poll('gone');
    expect(outcome.status).toBe('succeeded');
    expect(outcome.download).toMatchObject({ ok: false, type: 'UrlExpired' });
    expect(requests.filter((r) => r === '/gone.mp4')).toHaveLength(1);
  });

  it('leaves a failure a retry may change to the download activity', async () => {
    const { outcome } = await poll('busy');
    expect(outcome).toMatchObject({ status: 'succeeded', url: `${origin}/busy.mp4` });
    expect(outcome.download).toBeUndefined();
  });

  it('does not start a download the attempt has no time left for', async () => {
    const { outcome } = await poll('late', { startToCloseTimeoutMs: 3_500 });
    expect(outcome.status).toBe('succeeded');
    expect(outcome.download).toBeUndefined();
    expect(requests).not.toContain('/late.mp4');
  });

  it('leaves the video of a spare check to the download activity (the due check may cancel it mid-way)', async () => {
    const { outcome } = await poll('spare', { spare: true });
    expect(outcome).toMatchObject({ status: 'succeeded', url: `${origin}/spare.mp4` });
    expect(outcome.download).toBeUndefined();
    expect(requests).not.toContain('/spare.mp4');
  });
});
