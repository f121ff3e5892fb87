// The capacity gate, as a user meets it: `vidbatch server`, two `vidbatch worker`s, `vidbatch run`
// with no budget flag, against a gateway that caps running jobs per key (429 with the time until one finishes
// as Retry-After, on submits only). Every row succeeds with one job, the refused submits stay few (the batch
// hands out slots as jobs finish instead of every refused row trying again at once), and `status` says why
// rows wait while the gate holds them.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { writeVbenchCsv } from '../../bench/vbench';
import { startSimulator } from '../../src/simulator/server';
import { vidbatch, serverAndWorkers } from './cli-helpers';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const ROWS = 20;
const POLL = ['--first-poll', '1', '--poll-interval', '1', '--no-adaptive-poll'];

describe('a gateway that caps running jobs', () => {
  it('is met with a capacity gate: every row succeeds, few 429s, status shows the gate', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-capgate-'));
    const sim = await startSimulator({ maxRunningJobs: 3, jobSeconds: 10, jobJitterSeconds: 2 });
    cleanups.push(() => sim.close());
    const env = { GATEWAY_BASE_URL: sim.baseUrl, GATEWAY_API_KEY: sim.apiKey };
    await serverAndWorkers(dir, env, 2, cleanups);
    await writeVbenchCsv(join(dir, 'p.csv'), ROWS, 'all_dimension', 1800);
    const run = await vidbatch(['run', 'p.csv', '--detach', ...POLL], { cwd: dir, env });
    expect(run.code, run.stderr).toBe(0);
    const batch = /Started batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(run.stderr)![1]!;

    // While rows wait for a slot, status says so (the gate holds for most of the run: 20 rows, 3 at a time).
    let gate = '';
    const since = Date.now();
    while (!gate && Date.now() - since < 90_000) {
      const s = await vidbatch(['status', batch], { cwd: dir });
      gate =
        /capacity gate: \d+ jobs running \(the gateway's cap[^)]*\), \d+ rows waiting for a slot/.exec(
          s.stdout,
        )?.[0] ?? '';
      if (/COMPLETED/.test(s.stdout)) break;
      if (!gate) await new Promise((r) => setTimeout(r, 500));
    }
    expect(gate).toMatch(/the gateway's cap, as seen at its last refusal: [1-3]\)/);

    const watch = await vidbatch(['watch', batch], { cwd: dir });
    expect(watch.code, watch.stderr).toBe(0);
    expect(watch.stdout).toContain(`${batch}: ${ROWS} succeeded, 0 failed of ${ROWS}`);
    const stats = sim.stats();
    expect(stats.jobsCreated).toBe(ROWS); // one job per row: nothing paid twice
    const perJob = stats.rateLimited / ROWS;
    console.log(
      `capacity gate, cap 3, ${ROWS} rows: ${stats.rateLimited} 429s (${perJob.toFixed(2)} per job)`,
    );
    // Without the gate, every refused row retried at its own Retry-After: several 429s per job (6.46 in the
    // bench). With it, the ramp's first refusals (7 of 10 here) and the probes that find the gateway still
    // full: 0.65 per job alone; the bound leaves room for a loaded machine, far below a herd.
    expect(perJob).toBeLessThanOrEqual(1.5);
  }, 240_000);
});
