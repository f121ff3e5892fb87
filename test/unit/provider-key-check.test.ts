// Doctor's key check per provider, at the transport: Replicate's GET /account against the simulator's dialect
// (a right key answers, a wrong one is a 401, and neither makes a job); fal has no such call.
import { afterEach, describe, expect, it } from 'vitest';
import { loadGatewaySettings } from '../../src/config';
import { GatewayClient } from '../../src/gateway/client';
import { AuthenticationError, BadRequestError } from '../../src/gateway/errors';
import { PROVIDERS } from '../../src/gateway/providers';
import { startSimulator, type Simulator } from '../../src/simulator/server';

let sim: Simulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

const client = (provider: string, baseUrl: string, key: string) =>
  new GatewayClient(
    loadGatewaySettings({
      GATEWAY_PROVIDER: provider,
      GATEWAY_BASE_URL: baseUrl,
      GATEWAY_API_KEY: key,
      GATEWAY_TIMEOUT_MS: '2000',
    }),
  );

describe('the key check doctor makes', () => {
  it('every provider has one, or lists its models, except fal', () => {
    const without = PROVIDERS.filter((p) => !p.keyCheck && !p.models).map((p) => p.name);
    expect(without).toEqual(['fal']);
  });

  it("Replicate's GET /account: a right key answers, a wrong one is refused; no job either way", async () => {
    sim = await startSimulator({});
    const base = `${sim.origin}/replicate/v1`;
    const right = client('replicate', base, sim.apiKey);
    expect(right.canVerifyKey).toBe(true);
    await expect(right.verifyKey()).resolves.toBeUndefined();
    const wrong = client('replicate', base, 'r8_not_a_key');
    const refused = await wrong.verifyKey().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AuthenticationError);
    expect((refused as AuthenticationError).message).toContain('GET /account: 401');
    expect((refused as AuthenticationError).message).not.toContain('r8_not_a_key');
    const stats = sim.stats();
    expect(stats.jobsCreated).toBe(0);
    expect(stats.requests['GET /replicate/v1/account']).toMatchObject({ 200: 1, 401: 1 });
  });

  it('fal: nothing to ask, nothing sent', async () => {
    sim = await startSimulator({});
    const fal = client('fal', `${sim.origin}/fal`, sim.apiKey);
    expect(fal.canVerifyKey).toBe(false);
    expect(fal.canListModels).toBe(false);
    await expect(fal.verifyKey()).rejects.toBeInstanceOf(BadRequestError);
    expect(sim.stats().requests).toEqual({});
  });
});
