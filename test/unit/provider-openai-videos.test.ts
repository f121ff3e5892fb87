// The OpenAI Videos adapter: its request mapping and its reading of the reference's answers (recorded pairs
// below follow the shapes of the OpenAI, LiteLLM and OpenRouter references), then the transport speaking it
// to the simulator's dialect: statuses, errors and whether a job may exist, the video fetched with the key
// and the key kept off the result host.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gatewayTarget, loadGatewaySettings } from '../../src/config';
import { ConfigError } from '../../src/errors';
import { GatewayClient } from '../../src/gateway/client';
import {
  AuthenticationError,
  BadRequestError,
  NotFoundError,
  RateLimitError,
} from '../../src/gateway/errors';
import { openAiVideos } from '../../src/gateway/providers/openai-videos';
import { parseCsv } from '../../src/input/csv';
import { downloadVerified } from '../../src/results/download';
import { keysAtResults } from '../../src/simulator/openai-videos-routes';
import { finished, providerSetup, rowOf } from './provider-test-helpers';

const setup = providerSetup('openai-videos', '/openai/v1');
const row = rowOf('sora-2');

describe('the OpenAI Videos adapter', () => {
  it('maps the CSV onto model, prompt, seconds and size, and passes other columns on as fields', () => {
    const call = openAiVideos.submit(
      {
        model: 'sora-2',
        input: { prompt: 'a fox', input_reference: 'x' },
        parameters: { resolution: '720P', duration: 8, user: 'u1' },
      },
      'key-1',
    );
    expect(call).toEqual({
      method: 'POST',
      path: '/videos',
      body: {
        input_reference: 'x',
        user: 'u1',
        model: 'sora-2',
        prompt: 'a fox',
        seconds: '8',
        size: '1280x720',
      },
    });
    // No idempotency key: the reference names none.
    expect(call.headers).toBeUndefined();
    expect(openAiVideos.submit(row({ size: '720x1280', seconds: 12, duration: 5 }), 'k').body).toMatchObject({
      seconds: '12',
      size: '720x1280',
    });
    expect(openAiVideos.check('vid 1')).toEqual({ method: 'GET', path: '/videos/vid%201' });
    expect(openAiVideos.cancel!('vid_1')).toEqual({ method: 'DELETE', path: '/videos/vid_1' });
    expect(openAiVideos.authorization('sk-1')).toEqual({ authorization: 'Bearer sk-1' });
    expect(openAiVideos.videoNeedsKey).toBe(true);
  });

  it('says which values a model cannot take, naming those it can', () => {
    const v = (p: Record<string, unknown>, model?: string) => openAiVideos.validate!(row(p, model));
    expect(v({ resolution: '720P', duration: 8 })).toBeUndefined();
    expect(v({ resolution: '720P', duration: 5 })).toBe(
      'duration 5 is not one sora-2 takes: 4, 8, 12 seconds',
    );
    expect(v({ resolution: '1080P', duration: 4 })).toMatch(
      /size 1920x1080 is not one sora-2 takes: 720x1280, 1280x720 /,
    );
    expect(v({ size: '1792x1024', duration: 4 })).toMatch(/not one sora-2 takes/);
    expect(v({ size: '1792x1024', duration: 4 }, 'sora-2-pro')).toBeUndefined();
    expect(v({ resolution: '360P', duration: 4 })).toMatch(/resolution 360P has no OpenAI-Videos size/);
    // Other models behind a gateway: only the form is checked.
    expect(v({ resolution: '1080P', duration: 5 }, 'veo-3')).toBeUndefined();
    expect(v({ size: 'big', duration: 5 }, 'veo-3')).toMatch(/not <width>x<height>/);
  });

  it('reads the statuses and errors of the references', () => {
    const read = (json: unknown) => openAiVideos.readJob(json);
    // OpenAI / LiteLLM: the video object.
    expect(
      read({ id: 'video_1', object: 'video', status: 'queued', progress: 0, seconds: '8', size: '1280x720' }),
    ).toEqual({
      id: 'video_1',
      status: 'queued',
      rawStatus: 'queued',
    });
    expect(read({ id: 'video_1', status: 'in_progress', progress: 40 })).toMatchObject({ status: 'running' });
    expect(read({ id: 'video_1', status: 'completed', progress: 100 })).toEqual({
      id: 'video_1',
      status: 'completed',
      rawStatus: 'completed',
      url: '/videos/video_1/content',
    });
    expect(
      read({ id: 'video_1', status: 'failed', error: { code: 'moderation_blocked', message: 'blocked' } }),
    ).toMatchObject({ status: 'failed', error: { code: 'moderation_blocked', message: 'blocked' } });
    // OpenRouter: `pending`, a string error, the authenticated content URL.
    expect(read({ id: 'job-abc', polling_url: '/api/v1/videos/job-abc', status: 'pending' })).toMatchObject({
      status: 'queued',
    });
    expect(read({ id: 'job-abc', status: 'failed', error: 'Provider error' })).toMatchObject({
      status: 'failed',
      error: { message: 'Provider error' },
    });
    expect(
      read({
        id: 'job-abc',
        status: 'completed',
        unsigned_urls: ['https://openrouter.ai/api/v1/videos/job-abc/content?index=0'],
      }),
    ).toMatchObject({ url: 'https://openrouter.ai/api/v1/videos/job-abc/content?index=0' });
    expect(read({ id: 'job-abc', status: 'cancelled' })).toMatchObject({ status: 'failed' });
    expect(read({ status: 'queued' })).toHaveProperty('problem');
    // Errors: OpenAI's object (code may be null), OpenRouter's string.
    expect(
      openAiVideos.readError({
        error: { message: 'Invalid size', type: 'invalid_request_error', param: 'size', code: null },
      }),
    ).toEqual({ message: 'Invalid size' });
    expect(openAiVideos.readError({ error: 'Unauthorized' })).toEqual({ message: 'Unauthorized' });
    expect(openAiVideos.readError({ detail: 'x' })).toBeUndefined();
  });

  it('is chosen by GATEWAY_PROVIDER; its target names it; an unknown provider names those there are', () => {
    const env = { GATEWAY_BASE_URL: 'http://LiteLLM.local:4000/', GATEWAY_API_KEY: 'sk-1' };
    const settings = loadGatewaySettings({ ...env, GATEWAY_PROVIDER: 'openai-videos' });
    expect(settings.provider).toBe(openAiVideos);
    expect(settings.target).toBe('openai-videos+http://litellm.local:4000');
    // The default keeps its target (batch ids do not move) and its base URL check.
    expect(loadGatewaySettings({ ...env, GATEWAY_BASE_URL: 'https://g.example/v1' }).target).toBe(
      gatewayTarget('https://g.example/v1'),
    );
    expect(() => loadGatewaySettings(env)).toThrow(/ending in \/v1/);
    expect(() => loadGatewaySettings({ ...env, GATEWAY_PROVIDER: 'sora' })).toThrow(ConfigError);
    expect(() => loadGatewaySettings({ ...env, GATEWAY_PROVIDER: 'sora' })).toThrow(
      /GATEWAY_PROVIDER must be one of model-gateway, openai-videos/,
    );
  });
});

describe('the transport speaking OpenAI Videos to the simulator', () => {
  it('submits, checks and fetches the video with the key, never sending it to the result host', async () => {
    const { sim, client } = await setup({ redirectResults: 2 });
    const job = await client.submit(row({ resolution: '720P', duration: 4 }), 'k1');
    expect(job.status).toBe('queued');
    const done = await finished(client, job.id);
    expect(done.url).toBe(`${sim.origin}/openai/v1/videos/${job.id}/content`);
    const auth = client.videoAuth();
    expect(auth?.base).toBe(`${sim.origin}/openai/v1`);
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-oav-'));
    const video = await downloadVerified(done.url!, dir, 'a.mp4', { auth: auth! });
    expect(video.bytes).toBeGreaterThan(1000);
    // /content -> /files -> /cdn/hop1 -> /cdn: three hops off the API, none with the key.
    expect(sim.stats().redirectsServed).toBe(2);
    expect(keysAtResults(sim.state)).toBe(0);
    // The counter does see a key sent there: a base URL that takes in the whole origin lets it through.
    await downloadVerified(done.url!, dir, 'c.mp4', { auth: { ...auth!, base: sim.origin } });
    expect(keysAtResults(sim.state)).toBe(3);
    // Without the key the content endpoint refuses.
    await expect(downloadVerified(done.url!, dir, 'b.mp4')).rejects.toThrow(/HTTP 401/);
    expect(sim.stats().jobsCreated).toBe(1);
    expect(sim.stats().submitsWithoutIdempotencyKey).toBe(1);
  });

  it('maps refusals to errors that say no job was made, and refuses unsendable values unsent', async () => {
    const { sim, client, settings } = await setup();
    const wrong = new GatewayClient({ ...settings, apiKey: () => 'sk-wrong' });
    const refused = await wrong.submit(row({ duration: 4 }), 'k').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AuthenticationError);
    expect((refused as AuthenticationError).outcomeUnknown).toBe(false);
    await expect(client.getJob('vid_nope')).rejects.toBeInstanceOf(NotFoundError);
    const bad = await client.submit(row({ duration: 4 }, 'nope'), 'k').catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(BadRequestError);
    expect((bad as BadRequestError).message).toContain('model: unknown model nope');
    const unsent = await client.submit(row({ duration: 5 }), 'k').catch((e: unknown) => e);
    expect(unsent).toBeInstanceOf(BadRequestError);
    expect((unsent as BadRequestError).code).toBe('unsupported_value');
    expect((unsent as BadRequestError).outcomeUnknown).toBe(false);
    expect(sim.stats().jobsCreated).toBe(0);
  });

  it('holds on a 429 with its Retry-After, stops a job with DELETE, and lists models', async () => {
    const { sim, client } = await setup({ jobSeconds: 5, faults: { scope: 'status', error429: 1 } });
    const job = await client.submit(row({ duration: 8 }), 'k');
    await expect(client.getJob(job.id)).rejects.toBeInstanceOf(RateLimitError);
    expect(client.holds.remainingMs('status')).toBeGreaterThan(0);
    expect(client.holds.remainingMs('submit')).toBe(0);
    sim.setFaults({ error429: 0 });
    expect(await client.cancel(job.id, 'in_progress')).toBe('stopped');
    await expect(client.getJob(job.id, { maxWaitMs: 5000 })).rejects.toBeInstanceOf(NotFoundError);
    expect(await client.listModels()).toEqual(expect.arrayContaining(['sora-2', 'sora-2-pro']));
  });

  it('sends a row read for it as the row says: its defaults come from the CSV reader', async () => {
    const { client } = await setup();
    const [read] = parseCsv('prompt\na fox\n', 'x.csv', { provider: openAiVideos }).rows;
    expect(read).toMatchObject({ model: 'sora-2', parameters: { duration: 4, resolution: '720P' } });
    expect(client.prepare(read!)).toEqual({ request: read });
    const job = await client.submit(read!, 'k');
    expect((await client.getJob(job.id)).status).not.toBe('gone');
  });
});
