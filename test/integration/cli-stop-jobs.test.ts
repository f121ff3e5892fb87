// Stopping jobs at the provider, from the command line (spawned `vidbatch`, the simulator's dialects): a cancel
// never stops a job another batch's row follows, and a stop the provider only *requests* (fal, a running
// request whose app ignores it) leaves the job watched, so the video that arrives anyway is kept and never paid
// for again.
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { loadGatewaySettings } from '../../src/config';
import { finalStates, readManifest } from '../../src/results/manifest';
import { isStoppedJob } from '../../src/simulator/counters';
import { background, vidbatch, type CliRun } from './cli-helpers';
import { testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const FAST = ['--first-poll', '0.5', '--poll-interval', '0.5', '--poll-cap', '1', '--no-adaptive-poll'];
const output = (r: CliRun) => r.stdout + r.stderr;
const BATCH = /(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/;

/** A worker and the settings of `vidbatch` commands for one of the simulator's dialects. */
async function dialect(provider: 'fal' | 'replicate', jobSeconds: number) {
  const e = await testEnv({ jobSeconds, jobJitterSeconds: 0 });
  const path = provider === 'fal' ? '/fal' : '/replicate/v1';
  const settings = {
    TEMPORAL_ADDRESS: e.address,
    VIDBATCH_TASK_QUEUE: e.taskQueue,
    GATEWAY_PROVIDER: provider,
    GATEWAY_BASE_URL: `${e.sim.origin}${path}`,
    GATEWAY_API_KEY: e.sim.apiKey,
  };
  await e.startWorker({ ...loadGatewaySettings(settings), timeoutMs: 2000 });
  const command = (args: string[]) => vidbatch(args, { cwd: e.dir, env: settings });
  const start = (args: string[]) => background(args, { cwd: e.dir, env: settings });
  return { e, command, start };
}

async function csv(e: TestEnv, file: string, tag: string, rows: number) {
  const lines = [
    'id,prompt,duration',
    ...Array.from({ length: rows }, (_, i) => `r${i + 1},a kite ${tag} ${i + 1},5`),
  ];
  await writeFile(join(e.dir, file), lines.join('\n') + '\n');
}

const jobsOf = (e: TestEnv, tag: string) =>
  [...e.sim.state.jobs.values()].filter((j) => j.prompt.includes(tag));

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

const rowsOf = async (e: TestEnv, batchId: string) =>
  finalStates(await readManifest(join(e.dir, 'out', batchId, 'manifest.jsonl')).catch(() => []));

describe('stopping jobs at the provider', () => {
  it('a cancel leaves running the jobs another batch follows: that batch keeps their videos, nothing paid twice', async () => {
    const d = await dialect('replicate', 8);
    env = d.e;
    const tag = randomUUID().slice(0, 8);
    await csv(d.e, 'a.csv', tag, 3);
    const a = d.start(['run', 'a.csv', '--concurrency', '3', ...FAST]);
    const batchA = (await a.waitFor(BATCH))[1]!;
    await until('3 jobs made', () => jobsOf(d.e, tag).length === 3);
    // Another file with the same requests (other row ids, columns in another order: a batch of its own).
    await writeFile(
      join(d.e.dir, 'b.csv'),
      ['duration,id,prompt', ...[1, 2, 3].map((i) => `5,x${i},a kite ${tag} ${i}`)].join('\n') + '\n',
    );
    const b = d.start(['run', 'b.csv', '--concurrency', '3', ...FAST]);
    const batchB = (await b.waitFor(BATCH))[1]!;
    expect(batchB).not.toBe(batchA);
    await sleep(3_000); // B's rows read the root's journals and follow A's jobs
    const cancelled = await d.command(['cancel', batchA]);
    expect(cancelled.code, output(cancelled)).toBe(0);
    expect((await a.done).code).toBe(3);
    const finishedB = await b.done;
    expect(finishedB.stdout, output(finishedB)).toMatch(/3 succeeded, 0 failed of 3/);
    const jobs = jobsOf(d.e, tag);
    console.log(`cancel beside a follower: ${jobs.length} jobs, ${jobs.filter(isStoppedJob).length} stopped`);
    expect(jobs).toHaveLength(3);
    expect(jobs.filter(isStoppedJob)).toEqual([]);
    for (const row of await rowsOf(d.e, batchA)) {
      if (row.status === 'succeeded') continue;
      expect(row.jobStop).toBe('not_stopped');
      expect(row.errorMessage).toMatch(new RegExp(`${batchB} row x\\d follows it`));
    }
  });

  it('fal: a cancel its app ignores leaves the job watched; the video that arrives is kept, a re-run pays nothing', async () => {
    const d = await dialect('fal', 6);
    env = d.e;
    d.e.sim.setFaults({ cancelIgnored: 1 });
    const tag = randomUUID().slice(0, 8);
    await csv(d.e, 'x.csv', tag, 3);
    const first = d.start(['run', 'x.csv', '--concurrency', '3', '--late-check', '1', ...FAST]);
    const batchId = (await first.waitFor(BATCH))[1]!;
    await until(
      '3 jobs running',
      () => jobsOf(d.e, tag).filter((j) => d.e.sim.state.jobStatus(j) === 'running').length === 3,
    );
    const cancelled = await d.command(['cancel', batchId]);
    expect(cancelled.code, output(cancelled)).toBe(0);
    expect((await first.done).code).toBe(3);
    const ended = await rowsOf(d.e, batchId);
    expect(ended.map((r) => r.jobStop)).toEqual(['requested', 'requested', 'requested']);
    expect(ended[0]!.errorMessage).toContain(
      'the provider was asked to stop it, but may still finish and bill it',
    );
    expect(d.e.sim.stats().faultsInjected.cancelIgnored).toBe(3);
    // The jobs run on and complete; their prompts' late checks bring the videos home.
    await until('3 late videos kept', async () =>
      (await rowsOf(d.e, batchId)).every((r) => r.status === 'succeeded' && r.arrivedLate),
    );
    const rerun = await d.command(['run', 'x.csv', ...FAST]);
    expect(rerun.stdout, output(rerun)).toMatch(/3 succeeded, 0 failed of 3/);
    expect(jobsOf(d.e, tag)).toHaveLength(3);
  });
});
