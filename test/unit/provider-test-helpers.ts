// What the tests of each provider's adapter against the simulator share: a client speaking the provider's
// dialect to a simulator of its own, the rows it sends, and polling a job until it ends.
import { loadGatewaySettings } from '../../src/config';
import { GatewayClient, type JobState } from '../../src/gateway/client';
import type { SimulatorOptions } from '../../src/simulator/server';
import { simulators } from './simulator-test-helpers';

/**
 * Sets up, per test, a simulator (closed after the test) and a client of it as GATEWAY_PROVIDER=`provider`
 * with its base URL at `path` on the simulator; `env` adds settings. Call it at the top of a test file.
 */
export function providerSetup(provider: string, path: string, env: Record<string, string> = {}) {
  const start = simulators({ jobSeconds: 0.2 });
  return async (options: SimulatorOptions = {}) => {
    const sim = await start(options);
    const settings = loadGatewaySettings({
      GATEWAY_PROVIDER: provider,
      GATEWAY_BASE_URL: `${sim.origin}${path}`,
      GATEWAY_API_KEY: sim.apiKey,
      GATEWAY_TIMEOUT_MS: '2000',
      ...env,
    });
    return { sim, settings, client: new GatewayClient(settings) };
  };
}

/** A row of `defaultModel` by default, with the prompt `a fox` by default. */
export const rowOf =
  (defaultModel: string) =>
  (parameters: Record<string, unknown>, model = defaultModel, prompt = 'a fox') => ({
    model,
    input: { prompt },
    parameters,
  });

const completedOrFailed = (status: JobState['status']) => status === 'completed' || status === 'failed';

/** Checks job `id` every 50 ms until `ended` says its status is final (completed or failed by default). */
export async function finished(
  client: GatewayClient,
  id: string,
  ended: (status: JobState['status']) => boolean = completedOrFailed,
): Promise<JobState> {
  for (let i = 0; i < 100; i++) {
    const job = await client.getJob(id);
    if (ended(job.status)) return job;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`job ${id} never finished`);
}
