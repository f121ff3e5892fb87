// What the cluster tests start as a deployment would: `vidbatch simulator` as its own process (its counters,
// and waits on them), and `vidbatch worker`s.
import { background } from '../integration/cli-helpers';
import { required } from '../requirements';

/**
 * The cluster's address (VIDBATCH_CLUSTER_ADDRESS, set by .ci/run after `scripts/cluster.sh up`), or undefined
 * after saying how to start it; under CI=true a missing cluster is a failing test. The failing test is defined
 * only when it must fail, so a run with the cluster up lists no extra test. Call it at a file's top level.
 */
export function requireCluster(): string | undefined {
  const address = process.env.VIDBATCH_CLUSTER_ADDRESS;
  required(Boolean(address), {
    tag: 'cluster',
    missing: 'no cluster (VIDBATCH_CLUSTER_ADDRESS is not set)',
    remedy:
      'Run `scripts/cluster.sh up` and set VIDBATCH_CLUSTER_ADDRESS=127.0.0.1:27233 (what `scripts/cluster.sh env` prints) to run test/cluster',
    inCi: '`scripts/cluster.sh up` failed or did not run in .ci/run (see its output)',
  });
  return address;
}

/**
 * Hostile: Idempotency-Key ignored (the default), 503s, dropped connections and 429s on every route, 40
 * requests/s, jobs of 3 ± 1 s; `seed` picks the faults.
 */
export const hostileFlags = (seed: number) =>
  ['--job-seconds', '3', '--job-jitter', '1', '--rate-limit', '40', '--fault-5xx', '0.02'].concat([
    '--fault-drop',
    '0.01',
    '--fault-429',
    '0.03',
    '--seed',
    String(seed),
  ]);

export interface SimStats {
  jobsCreated: number;
  requests: Record<string, Record<string, number>>;
  idempotencyKeysBilledMoreThanOnce: Record<string, number>;
  faultsInjected: Record<string, number>;
  ambiguousSubmitsTotal: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `vidbatch simulator --port 0 ...flags` in `cwd`, stopped by `cleanups`. */
export async function simulatorProcess(flags: string[], cwd: string, cleanups: (() => Promise<unknown>)[]) {
  const sim = background(['simulator', '--port', '0', ...flags], { cwd });
  cleanups.push(() => sim.stop());
  const baseUrl = (await sim.waitFor(/GATEWAY_BASE_URL=(\S+)/))[1]!;
  const apiKey = (await sim.waitFor(/GATEWAY_API_KEY=(\S+)/))[1]!;
  const stats = async (): Promise<SimStats> =>
    (await (await fetch(new URL('/admin/stats', baseUrl))).json()) as SimStats;
  return {
    baseUrl,
    apiKey,
    stats,
    /** Waits until the simulator has created `jobs` jobs (the batch is that far along). */
    until: async (jobs: number) => {
      const deadline = Date.now() + 300_000;
      while ((await stats()).jobsCreated < jobs) {
        if (Date.now() > deadline) throw new Error(`the simulator never reached ${jobs} jobs`);
        await sleep(250);
      }
    },
    /** Seconds from now until the simulator sees a new job: the batch submits again. */
    recovery: async (): Promise<number> => {
      const from = Date.now();
      const before = (await stats()).jobsCreated;
      while ((await stats()).jobsCreated === before && Date.now() - from < 300_000) await sleep(200);
      return (Date.now() - from) / 1000;
    },
  };
}

/**
 * Starts a `vidbatch worker` in `dir` with `env` and short gateway timeouts (the hostile simulator drops
 * answers), ready when this returns; stopped by `cleanups`.
 */
export function workerStarter(env: Record<string, string>, cleanups: (() => Promise<unknown>)[]) {
  const workerEnv = {
    ...env,
    GATEWAY_TIMEOUT_MS: '5000',
    GATEWAY_SUBMIT_TIMEOUT_MS: '5000',
    VIDBATCH_SHUTDOWN_GRACE_MS: '3000',
  };
  return async (dir: string) => {
    const w = background(['worker'], { cwd: dir, env: workerEnv });
    cleanups.push(() => w.stop());
    await w.waitFor(/vidbatch worker polling task queue/, 120_000);
    return w;
  };
}
