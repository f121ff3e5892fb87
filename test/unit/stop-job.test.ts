// The stopJob activity against each dialect that can cancel a job, over real HTTP to the simulator: a running
// job is checked, then cancelled (it stops at the simulator); a finished one is only checked, so its video is
// kept and a cancel (OpenAI-Videos' DELETE) never deletes it; a provider without a cancel is only checked.
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import type { CheckInput } from '../../src/activities/jobs';
import { createStopActivities } from '../../src/activities/stop-job';
import type { GatewayClient } from '../../src/gateway/client';
import { DEFAULT_MODEL } from '../../src/contract/rows';
import { FAL_DEFAULT_MODEL } from '../../src/gateway/providers/fal';
import { REPLICATE_DEFAULT_MODEL } from '../../src/gateway/providers/replicate';
import { finished, providerSetup, rowOf } from './provider-test-helpers';

const DIALECTS = [
  { provider: 'fal', path: '/fal', row: rowOf(FAL_DEFAULT_MODEL)({ duration: 5 }) },
  { provider: 'replicate', path: '/replicate/v1', row: rowOf(REPLICATE_DEFAULT_MODEL)({ duration: 5 }) },
  { provider: 'openai-videos', path: '/openai/v1', row: rowOf('sora-2')({ duration: 4 }) },
];

const env = () => new MockActivityEnvironment({ startToCloseTimeoutMs: 30_000 });
/** The activity, as the worker calls it: with the activity context the mock environment sets up. */
const stopOf = (client: GatewayClient) => (input: CheckInput) => createStopActivities(client).stopJob(input);

describe.each(DIALECTS)('stopJob, GATEWAY_PROVIDER=$provider', ({ provider, path, row }) => {
  const setup = providerSetup(provider, path);

  it('cancels a running job at the provider: it ends there, counted as stopped', async () => {
    const { sim, client } = await setup({ jobSeconds: 30 });
    const job = await client.submit(row, 'k');
    const stopJob = stopOf(client);
    expect(await env().run(stopJob, { jobId: job.id })).toEqual({ state: 'stopped' });
    expect((await client.getJob(job.id).catch(() => undefined))?.status ?? 'failed').toBe('failed');
    expect(sim.stats().jobsStopped).toBe(1);
  });

  it('keeps a job that finished before the stop: its video, and no cancel sent', async () => {
    const { sim, client } = await setup({ jobSeconds: 0.2 });
    const job = await client.submit(row, 'k');
    await finished(client, job.id);
    const stopJob = stopOf(client);
    const stop = await env().run(stopJob, { jobId: job.id });
    expect(stop).toMatchObject({ state: 'succeeded' });
    expect(sim.stats().jobsStopped).toBe(0);
    const cancels = Object.entries(sim.stats().requests).filter(([route]) => /cancel|^DELETE/.test(route));
    expect(cancels).toEqual([]);
  });
});

describe('stopJob, GATEWAY_PROVIDER=model-gateway (no cancel)', () => {
  const setup = providerSetup('model-gateway', '/v1');

  it('checks the job and leaves it running: nothing is stopped', async () => {
    const { sim, client } = await setup({ jobSeconds: 30 });
    const job = await client.submit(rowOf(DEFAULT_MODEL)({ duration: 5 }), 'k');
    const stopJob = stopOf(client);
    expect(await env().run(stopJob, { jobId: job.id })).toMatchObject({ state: 'unfinished' });
    expect(sim.stats().jobsStopped).toBe(0);
  });
});
