// The Replicate adapter: its request mapping and its reading of the reference's answers (the recorded pairs
// below follow Replicate's HTTP reference, its rate-limit page and a 422 as the API sends it), then the
// transport speaking it to the simulator's Replicate dialect: statuses, errors and whether a job may exist,
// cancel, deadlines and removed data.
import { describe, expect, it } from 'vitest';
import { GatewayClient } from '../../src/gateway/client';
import {
  AuthenticationError,
  BadRequestError,
  NotFoundError,
  RateLimitError,
  TimeoutError,
} from '../../src/gateway/errors';
import type { ProviderJob } from '../../src/gateway/provider';
import { replicate, REPLICATE_DEFAULT_MODEL } from '../../src/gateway/providers/replicate';
import { looksLikeMp4 } from '../../src/results/download';
import { finished as finishedWhen, providerSetup, rowOf } from './provider-test-helpers';

const setup = providerSetup('replicate', '/replicate/v1', { GATEWAY_SUBMIT_TIMEOUT_MS: '1000' });
const row = rowOf(REPLICATE_DEFAULT_MODEL);

/** Polls job `id` until it is neither queued nor running. */
const finished = (client: GatewayClient, id: string) =>
  finishedWhen(client, id, (status) => status !== 'queued' && status !== 'running');

const ID = 'gm3qorzdhgbfurvjtvhg6dckhu';

describe('the Replicate adapter', () => {
  it('creates on the model`s predictions, or with `version` for a pinned one, mapping resolution and duration', () => {
    const call = replicate.submit(
      row({ resolution: '720P', duration: 5, camera_fixed: true }, REPLICATE_DEFAULT_MODEL),
      'key-1',
    );
    expect(call).toEqual({
      method: 'POST',
      path: `/models/${REPLICATE_DEFAULT_MODEL}/predictions`,
      body: { input: { camera_fixed: true, prompt: 'a fox', resolution: '720p', duration: 5 } },
    });
    // Replicate takes no idempotency key: none is sent.
    expect(call.headers).toBeUndefined();
    expect(replicate.submit(row({}, 'owner/model:5c7d5dc6dd8b'), 'k')).toEqual({
      method: 'POST',
      path: '/predictions',
      body: { version: 'owner/model:5c7d5dc6dd8b', input: { prompt: 'a fox' } },
    });
    expect(replicate.check(ID)).toEqual({ method: 'GET', path: `/predictions/${ID}` });
    expect(replicate.cancel!(ID)).toEqual({
      method: 'POST',
      path: `/predictions/${ID}/cancel`,
      kind: 'status',
    });
    expect(replicate.authorization('r8_x')).toEqual({ authorization: 'Bearer r8_x' });
  });

  it('says which values the default model cannot take, naming those it can; other models pass', () => {
    const v = (p: Record<string, unknown>, model?: string) => replicate.validate!(row(p, model));
    expect(v({ resolution: '1080P', duration: 12 })).toBeUndefined();
    expect(v({ resolution: '1440P', duration: 5 })).toBe(
      `resolution 1440P is not one ${REPLICATE_DEFAULT_MODEL} takes: 480P, 720P, 1080P`,
    );
    expect(v({ resolution: '720P', duration: 15 })).toBe(
      `duration 15 is not one ${REPLICATE_DEFAULT_MODEL} takes: 2 to 12 whole seconds`,
    );
    expect(v({ duration: 30 }, 'minimax/video-01')).toBeUndefined();
    expect(v({}, 'modelfamily-1.0-r2v')).toMatch(/is not a Replicate model/);
  });

  it('reads the prediction`s statuses, outputs and errors', () => {
    const read = (json: unknown) => replicate.readJob(json) as ProviderJob;
    const urls = {
      get: `https://api.replicate.com/v1/predictions/${ID}`,
      cancel: `https://api.replicate.com/v1/predictions/${ID}/cancel`,
    };
    const base = {
      id: ID,
      model: 'replicate/hello-world',
      version: 'hidden',
      input: { text: 'Alice' },
      logs: '',
      urls,
    };
    expect(read({ ...base, status: 'starting', output: null, error: null })).toEqual({
      id: ID,
      status: 'queued',
      rawStatus: 'starting',
    });
    expect(read({ ...base, status: 'processing' })).toMatchObject({ status: 'running' });
    const file =
      'https://replicate.delivery/yhqm/zhBT5Cu9HFZVCZC9ecfY80gCXM9uCtA1f5vJe7MHSoJRIx3NB/out-0.mp4';
    expect(read({ ...base, status: 'succeeded', output: file, data_removed: false })).toMatchObject({
      status: 'completed',
      url: file,
    });
    // The output-files page's example: an array of URLs.
    expect(read({ ...base, status: 'succeeded', output: [file, `${file}?2`] })).toMatchObject({ url: file });
    expect(read({ ...base, status: 'succeeded', output: 'hello Alice' })).toEqual({
      id: ID,
      status: 'completed',
      rawStatus: 'succeeded',
    });
    // Past its hour: the record stays, the output is gone.
    expect(read({ ...base, status: 'succeeded', output: null, data_removed: true })).toMatchObject({
      status: 'gone',
    });
    expect(read({ ...base, status: 'failed', error: 'CUDA out of memory' })).toMatchObject({
      status: 'failed',
      error: { code: 'prediction_failed', message: 'CUDA out of memory' },
    });
    expect(read({ ...base, status: 'canceled' })).toMatchObject({
      status: 'failed',
      error: { code: 'canceled' },
    });
    expect(read({ ...base, status: 'aborted' })).toMatchObject({
      status: 'failed',
      error: { code: 'aborted' },
    });
    expect(read({ ...base, status: 'booting' })).toMatchObject({ status: 'unknown' });
    expect(replicate.readJob({ status: 'starting' })).toHaveProperty('problem');
  });

  it('reads Replicate`s error bodies: throttling, validation, authentication', () => {
    expect(replicate.readError({ detail: 'Request was throttled. Your rate limit resets in ~30s.' })).toEqual(
      {
        message: 'Request was throttled. Your rate limit resets in ~30s.',
      },
    );
    expect(
      replicate.readError({
        detail: '- input.seed: Invalid type. Expected: integer, given: null\n',
        status: 422,
        title: 'Input validation failed',
        invalid_fields: [
          {
            type: 'invalid_type',
            field: 'input.seed',
            description: 'Invalid type. Expected: integer, given: null',
          },
        ],
      }),
    ).toEqual({
      code: 'Input validation failed',
      message: 'input.seed: Invalid type. Expected: integer, given: null',
    });
    expect(
      replicate.readError({
        title: 'Unauthenticated',
        detail: 'You did not pass a valid authentication token',
        status: 401,
      }),
    ).toEqual({ code: 'Unauthenticated', message: 'You did not pass a valid authentication token' });
    expect(replicate.readError({ error: { message: 'x' } })).toBeUndefined();
  });
});

describe('the transport speaking Replicate to the simulator', () => {
  it('creates, checks and gets an output URL it can fetch without the key', async () => {
    const { sim, client } = await setup();
    const job = await client.submit(row({ resolution: '480P', duration: 5 }), 'k1');
    expect(job).toMatchObject({ status: 'queued', rawStatus: 'starting' });
    const done = await finished(client, job.id);
    expect(done.status).toBe('completed');
    expect(looksLikeMp4(Buffer.from(await (await fetch(done.url!)).arrayBuffer()))).toBe(true);
    expect(sim.stats()).toMatchObject({ jobsCreated: 1, completedJobsNeverDelivered: 0 });
  });

  it('maps refusals to errors that say no job was made, and a late answer to one that says one may exist', async () => {
    const { sim, client, settings } = await setup();
    const wrong = new GatewayClient({ ...settings, apiKey: () => 'sk-wrong' });
    const refused = await wrong.submit(row({}), 'k').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AuthenticationError);
    expect((refused as AuthenticationError).message).toContain(
      'You did not pass a valid authentication token',
    );
    const unsent = await client.submit(row({ duration: 40 }), 'k').catch((e: unknown) => e);
    expect((unsent as BadRequestError).code).toBe('unsupported_value');
    await expect(client.getJob('nope')).rejects.toBeInstanceOf(NotFoundError);
    expect(sim.stats().jobsCreated).toBe(0);

    sim.setFaults({ slow: 1, slowMs: 3000, scope: 'submit' });
    const late = await client.submit(row({}), 'k').catch((e: unknown) => e);
    expect(late).toBeInstanceOf(TimeoutError);
    expect((late as TimeoutError).outcomeUnknown).toBe(true);
    expect(sim.stats().jobsCreated).toBe(1);
  });

  it('holds on a throttling 429 with its Retry-After, and cancels: canceled, a finished one unchanged', async () => {
    const { sim, client } = await setup({ jobSeconds: 5, rateLimit: 1, burst: 1 });
    const job = await client.submit(row({}), 'k');
    const throttled = await client.submit(row({}), 'k').catch((e: unknown) => e);
    expect(throttled).toBeInstanceOf(RateLimitError);
    expect((throttled as RateLimitError).message).toMatch(/resets in ~\d+s/);
    expect(client.holds.remainingMs('submit')).toBeGreaterThan(0);
    sim.setOptions({ rateLimit: 0 });
    expect(await client.cancel(job.id, 'processing', { maxWaitMs: 5000 })).toBe('stopped');
    expect(await client.getJob(job.id)).toMatchObject({ status: 'failed', rawStatus: 'canceled' });
    expect(await client.cancel(job.id, 'canceled')).toBe('stopped');
    expect(sim.stats().jobsCreated).toBe(1);
  });

  it('reads a failed prediction`s error, and a prediction past its hour as gone', async () => {
    const { client } = await setup({ jobTtlSeconds: 0.5, faults: { moderationWords: ['forbidden'] } });
    const failed = await finished(
      client,
      (await client.submit(row({}, REPLICATE_DEFAULT_MODEL, 'forbidden'), 'k')).id,
    );
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'prediction_failed' } });
    const job = await client.submit(row({}), 'k');
    expect((await finished(client, job.id)).status).toBe('completed');
    await new Promise((r) => setTimeout(r, 700));
    expect((await client.getJob(job.id)).status).toBe('gone');
  });
});
