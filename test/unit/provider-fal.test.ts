// The fal queue adapter: its request mapping and its reading of the reference's answers (the recorded pairs
// below are the examples of fal's queue and error references), then the transport speaking it to the
// simulator's fal dialect: statuses, errors and whether a job may exist, cancel, and the video.
import { describe, expect, it } from 'vitest';
import { loadGatewaySettings } from '../../src/config';
import { GatewayClient } from '../../src/gateway/client';
import {
  AuthenticationError,
  BadRequestError,
  ConnectionError,
  NotFoundError,
  RateLimitError,
  ServerError,
} from '../../src/gateway/errors';
import type { ProviderJob } from '../../src/gateway/provider';
import { fal, FAL_DEFAULT_MODEL } from '../../src/gateway/providers/fal';
import { looksLikeMp4 } from '../../src/results/download';
import { finished, providerSetup, rowOf } from './provider-test-helpers';

const setup = providerSetup('fal', '/fal');
const row = rowOf(FAL_DEFAULT_MODEL);

const ID = '80e732af-660e-45cd-bd63-580e4f2a94cc';
const QUEUE = 'https://queue.fal.run';

describe('the fal adapter', () => {
  it('posts the flat input to the whole model id, with fal`s spelling of resolution and duration', () => {
    const call = fal.submit(
      {
        model: FAL_DEFAULT_MODEL,
        input: { prompt: 'a fox', negative_prompt: 'blur' },
        parameters: { resolution: '720P', duration: 5, seed: 7 },
      },
      'key-1',
    );
    expect(call).toEqual({
      method: 'POST',
      path: `/${FAL_DEFAULT_MODEL}`,
      body: { seed: 7, prompt: 'a fox', negative_prompt: 'blur', resolution: '720p', duration: '5' },
    });
    // fal takes no idempotency key: none is sent.
    expect(call.headers).toBeUndefined();
    // Status, result and cancel use the job id, which holds the app only (never the model's sub-path).
    const id = `fal-ai/wan-25-preview/requests/${ID}`;
    expect(fal.check(id)).toEqual({ method: 'GET', path: `/${id}/status` });
    expect(fal.cancel!(id)).toEqual({ method: 'PUT', path: `/${id}/cancel` });
    expect(fal.authorization('k')).toEqual({ authorization: 'Key k' });
    expect(fal.videoNeedsKey).toBe(false);
  });

  it('says which values the default model cannot take, naming those it can; other models pass', () => {
    const v = (p: Record<string, unknown>, model?: string) => fal.validate!(row(p, model));
    expect(v({ resolution: '1080P', duration: 10 })).toBeUndefined();
    expect(v({ resolution: '4320P', duration: 5 })).toBe(
      `resolution 4320P is not one ${FAL_DEFAULT_MODEL} takes: 480P, 720P, 1080P`,
    );
    expect(v({ resolution: '720P', duration: 7 })).toBe(
      `duration 7 is not one ${FAL_DEFAULT_MODEL} takes: 5 or 10 seconds`,
    );
    expect(
      v({ resolution: '720P', duration: 7 }, 'fal-ai/kling-video/v2.5-turbo/pro/text-to-video'),
    ).toBeUndefined();
    expect(v({}, 'modelfamily-1.0-r2v')).toMatch(/is not a fal model id/);
  });

  it('reads the queue`s answers: submit, IN_QUEUE, IN_PROGRESS, COMPLETED (then its result) and failures', () => {
    const read = (json: unknown) => fal.readJob(json) as ProviderJob;
    const urls = (app: string) => ({
      response_url: `${QUEUE}/${app}/requests/${ID}`,
      status_url: `${QUEUE}/${app}/requests/${ID}/status`,
      cancel_url: `${QUEUE}/${app}/requests/${ID}/cancel`,
    });
    // The queue reference's submit example (its answer has no status of its own: queued).
    expect(read({ request_id: ID, ...urls('fal-ai/fast-sdxl') })).toEqual({
      id: `fal-ai/fast-sdxl/requests/${ID}`,
      status: 'queued',
      rawStatus: 'IN_QUEUE',
    });
    // A sub-path model: the URLs fal gives use the app; so does the id, on any host or path prefix.
    expect(read({ status: 'IN_QUEUE', queue_position: 3, ...urls('fal-ai/wan-25-preview') }).id).toBe(
      `fal-ai/wan-25-preview/requests/${ID}`,
    );
    expect(
      read({ status: 'IN_QUEUE', response_url: `http://127.0.0.1:9/fal/workflows/me/flow/requests/${ID}` })
        .id,
    ).toBe(`workflows/me/flow/requests/${ID}`);
    expect(read({ status: 'IN_PROGRESS', logs: [], ...urls('fal-ai/fast-sdxl') })).toMatchObject({
      status: 'running',
    });
    const done = read({
      status: 'COMPLETED',
      logs: [],
      metrics: { inference_time: 12.5 },
      ...urls('fal-ai/fast-sdxl'),
    });
    expect(done).toMatchObject({ status: 'completed', rawStatus: 'COMPLETED' });
    expect(done.follow?.call).toEqual({ method: 'GET', path: `/fal-ai/fast-sdxl/requests/${ID}` });
    // The model page's example result.
    const video = {
      content_type: 'video/mp4',
      url: 'https://storage.googleapis.com/falserverless/example_outputs/wan-25-i2v-output.mp4',
    };
    expect(done.follow?.read({ video, seed: 175932751 })).toMatchObject({
      status: 'completed',
      url: video.url,
    });
    expect(done.follow?.read({ seed: 1 })).toEqual({ id: '', status: 'completed', rawStatus: 'COMPLETED' });
    // A request that failed still ends COMPLETED, with `error` and `error_type`: no result to fetch.
    expect(
      read({
        status: 'COMPLETED',
        error: 'Request timed out',
        error_type: 'request_timeout',
        ...urls('fal-ai/fast-sdxl'),
      }),
    ).toEqual({
      id: `fal-ai/fast-sdxl/requests/${ID}`,
      status: 'failed',
      rawStatus: 'COMPLETED',
      error: { code: 'request_timeout', message: 'Request timed out' },
    });
    // What fal does not document maps through status.ts: unknown keeps polling, FAILED ends.
    expect(read({ status: 'WARMING_UP', ...urls('a/b') })).toMatchObject({ status: 'unknown' });
    expect(read({ status: 'FAILED', ...urls('a/b') })).toMatchObject({ status: 'failed' });
    expect(fal.readJob({ status: 'IN_QUEUE' })).toHaveProperty('problem');
    expect(fal.readJob({ status: 'IN_QUEUE', response_url: `${QUEUE}/fal-ai/fast-sdxl` })).toHaveProperty(
      'problem',
    );
  });

  it('reads fal`s error bodies: request errors, model errors and the cancel answers', () => {
    expect(fal.readError({ detail: 'Request timed out', error_type: 'request_timeout' })).toEqual({
      code: 'request_timeout',
      message: 'Request timed out',
    });
    expect(
      fal.readError({
        detail: [
          {
            loc: ['body', 'prompt'],
            msg: 'The content could not be processed because it contained material flagged by a content checker.',
            type: 'content_policy_violation',
            url: 'https://docs.fal.ai/errors/#content_policy_violation',
          },
        ],
      }),
    ).toEqual({
      code: 'content_policy_violation',
      message:
        'prompt: The content could not be processed because it contained material flagged by a content checker.',
    });
    expect(fal.readError({ status: 'ALREADY_COMPLETED' })).toEqual({
      code: 'ALREADY_COMPLETED',
      message: 'ALREADY_COMPLETED',
    });
    expect(fal.readError({ error: { message: 'x' } })).toBeUndefined();
  });

  it('takes the queue as base URL, not the synchronous fal.run', () => {
    expect(fal.checkBaseUrl('https://queue.fal.run')).toBeUndefined();
    expect(fal.checkBaseUrl('https://fal.run')).toMatch(/queue/);
    expect(
      loadGatewaySettings({
        GATEWAY_PROVIDER: 'fal',
        GATEWAY_BASE_URL: 'https://queue.fal.run/',
        GATEWAY_API_KEY: 'k',
      }).target,
    ).toBe('fal+https://queue.fal.run');
  });
});

describe('the transport speaking fal`s queue to the simulator', () => {
  it('submits, checks (status, then result) and gets a video URL it can fetch without the key', async () => {
    const { sim, client } = await setup({ redirectResults: 1 });
    const job = await client.submit(row({ resolution: '480P', duration: 5 }), 'k1');
    expect(job).toMatchObject({ status: 'queued', rawStatus: 'IN_QUEUE' });
    expect(job.id).toMatch(/^fal-ai\/wan-25-preview\/requests\/vid_/);
    const done = await finished(client, job.id);
    expect(done).toMatchObject({ id: job.id, status: 'completed' });
    const bytes = Buffer.from(await (await fetch(done.url!)).arrayBuffer());
    expect(looksLikeMp4(bytes)).toBe(true);
    expect(sim.stats()).toMatchObject({ jobsCreated: 1, completedJobsNeverDelivered: 0 });
  });

  it('maps refusals to errors that say no job was made, and lost answers to ones that say one may exist', async () => {
    const { sim, client, settings } = await setup();
    const wrong = new GatewayClient({ ...settings, apiKey: () => 'sk-wrong' });
    const refused = await wrong.submit(row({}), 'k').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AuthenticationError);
    expect((refused as AuthenticationError).outcomeUnknown).toBe(false);
    const noApp = await client.submit(row({}, 'fal-ai/no-such-app'), 'k').catch((e: unknown) => e);
    expect(noApp).toBeInstanceOf(NotFoundError);
    expect((noApp as NotFoundError).outcomeUnknown).toBe(false);
    const unsent = await client.submit(row({ duration: 7 }), 'k').catch((e: unknown) => e);
    expect((unsent as BadRequestError).code).toBe('unsupported_value');
    expect(sim.stats().jobsCreated).toBe(0);

    sim.setFaults({ drop: 1, scope: 'submit' });
    const dropped = await client.submit(row({}), 'k').catch((e: unknown) => e);
    expect(dropped).toBeInstanceOf(ConnectionError);
    expect((dropped as ConnectionError).outcomeUnknown).toBe(true);
    sim.setFaults({ drop: 0, error502After: 1 });
    const proxy = await client.submit(row({}), 'k').catch((e: unknown) => e);
    expect(proxy).toBeInstanceOf(ServerError);
    expect((proxy as ServerError).outcomeUnknown).toBe(true);
    expect(sim.stats().jobsCreated).toBe(2);
  });

  it('reads a failed request`s error from its COMPLETED status, and a forgotten one as 404', async () => {
    const { client } = await setup({ jobTtlSeconds: 0.5, faults: { moderationWords: ['forbidden'] } });
    const job = await client.submit(row({}, FAL_DEFAULT_MODEL, 'a forbidden fox'), 'k');
    const done = await finished(client, job.id);
    expect(done).toMatchObject({ status: 'failed', error: { code: 'content_policy_violation' } });
    await new Promise((r) => setTimeout(r, 700));
    await expect(client.getJob(job.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('holds on a 429 with its Retry-After, and cancels with a PUT: only requested while running, then ALREADY_COMPLETED', async () => {
    const { sim, client } = await setup({ jobSeconds: 5, faults: { scope: 'status', error429: 1 } });
    const job = await client.submit(row({}), 'k');
    const limited = await client.getJob(job.id).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(RateLimitError);
    expect((limited as RateLimitError).retryAfterMs).toBeGreaterThan(0);
    expect(client.holds.remainingMs('status')).toBeGreaterThan(0);
    sim.setFaults({ error429: 0 });
    // A running request is only asked to stop (its app may finish it); a queued one is removed.
    expect(await client.cancel(job.id, 'IN_PROGRESS', { maxWaitMs: 5000 })).toBe('requested');
    expect(await client.getJob(job.id)).toMatchObject({
      status: 'failed',
      error: { code: 'client_cancelled' },
    });
    const again = await client.cancel(job.id, 'IN_QUEUE').catch((e: unknown) => e);
    expect(again).toBeInstanceOf(BadRequestError);
    expect((again as BadRequestError).code).toBe('ALREADY_COMPLETED');
    expect(sim.stats().requests['PUT /fal/{app}/requests/{id}/cancel']).toEqual({ 202: 1, 400: 1 });
  });
});
