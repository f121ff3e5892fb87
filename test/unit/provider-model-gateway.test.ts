// The Model Gateway adapter on its own: the calls it asks for and how it reads the spec's answers. The
// transport speaking it is gateway-client.test.ts.
import { describe, expect, it } from 'vitest';
import { modelGateway } from '../../src/gateway/providers/model-gateway';
import { DEFAULT_PROVIDER, providerNamed } from '../../src/gateway/providers';

describe('the Model Gateway adapter', () => {
  it('is the default, and asks for the spec calls with the Idempotency-Key', () => {
    expect(DEFAULT_PROVIDER).toBe(modelGateway);
    expect(providerNamed('model-gateway')).toBe(modelGateway);
    const request = { model: 'm', input: { prompt: 'p' }, parameters: { duration: 5 } };
    expect(modelGateway.submit(request, 'k1')).toEqual({
      method: 'POST',
      path: '/videos/generations',
      body: request,
      headers: { 'idempotency-key': 'k1' },
    });
    expect(modelGateway.check('vid/1')).toEqual({ method: 'GET', path: '/videos/generations/vid%2F1' });
    expect(modelGateway.cancel).toBeUndefined();
    expect(modelGateway.videoNeedsKey).toBe(false);
    expect(modelGateway.checkBaseUrl('https://g.example/v1')).toBeUndefined();
    expect(modelGateway.checkBaseUrl('https://g.example/v2')).toMatch(/ending in \/v1/);
  });

  it('reads statuses, the URL and errors', () => {
    expect(modelGateway.readJob({ id: 'vid_1', status: 'queued' })).toEqual({
      id: 'vid_1',
      status: 'queued',
      rawStatus: 'queued',
    });
    expect(modelGateway.readJob({ id: 'vid_1', status: 'UNKNOWN' })).toMatchObject({ status: 'gone' });
    expect(
      modelGateway.readJob({
        id: 'vid_1',
        status: 'completed',
        data: [{ url: 'https://cdn.example/v.mp4' }],
      }),
    ).toMatchObject({ status: 'completed', url: 'https://cdn.example/v.mp4' });
    // A URL that is not one is no URL: the row ends no_video_url, its job id kept.
    expect(
      modelGateway.readJob({ id: 'vid_1', status: 'completed', data: [{ url: 'nope' }] }),
    ).not.toHaveProperty('url');
    expect(
      modelGateway.readJob({
        id: 'vid_1',
        status: 'failed',
        error: { code: 'content_moderation', message: 'no' },
      }),
    ).toMatchObject({ status: 'failed', error: { code: 'content_moderation', message: 'no' } });
    expect(modelGateway.readJob({ id: '', status: 'queued' })).toHaveProperty('problem');
    expect(modelGateway.readError({ error: { code: 'x', message: 'y' } })).toEqual({
      code: 'x',
      message: 'y',
    });
    expect(modelGateway.readError({ error: {} })).toEqual({});
    expect(modelGateway.readError('<html>')).toBeUndefined();
    expect(modelGateway.models!.read({ data: [{ id: 'a' }] })).toEqual(['a']);
    expect(modelGateway.models!.read({})).toEqual({ problem: 'GET /models returned an unexpected body' });
  });
});
