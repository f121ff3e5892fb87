// A rolling upgrade on the self-hosted cluster (README "Deploying new code during a long batch"): a batch
// started by an older build of vidbatch (its worker and its `run`), the pre-deploy replay check of this
// checkout's workflow code against the cluster's open histories, then the old worker stopped and this build's
// worker started on the same task queue. The batch ends on the new build with every row once and no job paid
// twice. Runs with the rest of test/cluster when VIDBATCH_CLUSTER_ADDRESS and VIDBATCH_UPGRADE_FROM are set.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { writeVbenchCsv } from '../../bench/vbench';
import { background, vidbatch } from '../integration/cli-helpers';
import { simulatorProcess } from './helpers';

const ADDRESS = process.env.VIDBATCH_CLUSTER_ADDRESS;
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/**
 * The older build: an earlier commit of the same major version (1.x). A 0.x build's batches are not upgraded
 * in place: they run on another task queue and finish with a 0.x worker.
 */
const OLD = process.env.VIDBATCH_UPGRADE_FROM;
const ROWS = 60;
const run = promisify(execFile);

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The old build's sources, with this checkout's node_modules (same dependencies). */
async function oldBuild(base: string): Promise<string> {
  const dir = join(base, 'old-build');
  await mkdir(dir);
  await run('bash', ['-c', `git -C "${ROOT}" archive "${OLD}" | tar -x -C "${dir}"`], { timeout: 60_000 });
  await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return join(dir, 'bin', 'vidbatch.mjs');
}

describe.skipIf(!ADDRESS || !OLD)('a rolling upgrade on the cluster', () => {
  it('continues a batch of an older build on this build, after the replay check passed', async () => {
    const base = await mkdtemp(join(tmpdir(), 'vidbatch-upgrade-'));
    const oldCli = await oldBuild(base);
    const folders = {
      old: join(base, 'old-worker'),
      new: join(base, 'new-worker'),
      user: join(base, 'user'),
    };
    const shared = { in: join(base, 'in'), out: join(base, 'out') };
    for (const d of [...Object.values(folders), ...Object.values(shared)])
      await mkdir(d, { recursive: true });
    // A task queue of its own: the other cluster test's workers (this build) must not take these tasks.
    const temporal = {
      TEMPORAL_ADDRESS: ADDRESS!,
      VIDBATCH_TASK_QUEUE: `upgrade-${Date.now().toString(36)}`,
    };

    const { baseUrl, apiKey, stats } = await simulatorProcess(
      ['--job-seconds', '4', '--job-jitter', '1', '--rate-limit', '20'],
      base,
      cleanups,
    );
    const workerEnv = {
      ...temporal,
      GATEWAY_BASE_URL: baseUrl,
      GATEWAY_API_KEY: apiKey,
      VIDBATCH_INPUT_ROOT: shared.in,
      VIDBATCH_OUT_ROOT: shared.out,
      VIDBATCH_SHUTDOWN_GRACE_MS: '10000',
    };

    const oldWorker = background(['worker'], { cwd: folders.old, env: workerEnv, cli: oldCli });
    cleanups.push(() => oldWorker.stop());
    await oldWorker.waitFor(/vidbatch worker polling task queue/, 180_000);
    const csv = join(shared.in, 'prompts.csv');
    await writeVbenchCsv(csv, ROWS, 'all_dimension', Date.now() % 1_000_000_000);
    const started = await vidbatch(
      ['run', csv, '--detach', '--concurrency', '10', '--first-poll', '3', '--poll-interval', '1'],
      { cwd: folders.user, env: temporal, cli: oldCli },
    );
    expect(started.code, started.stderr).toBe(0);
    const batch = /Started batch (batch-[0-9a-f]{16}(?:-[0-9a-f]{8})?)/.exec(started.stderr)![1]!;
    const deadline = Date.now() + 300_000;
    while ((await stats()).jobsCreated < 20 && Date.now() < deadline) await sleep(250);

    // Before the switch: this checkout's workflow code replays every open workflow of the batch.
    const check = await run(
      'npm',
      [
        'run',
        '-s',
        'replay-check',
        '--',
        '--query',
        `TaskQueue = '${temporal.VIDBATCH_TASK_QUEUE}' AND ExecutionStatus = 'Running'`,
      ],
      {
        cwd: ROOT,
        env: { ...process.env, TEMPORAL_ADDRESS: ADDRESS! },
        timeout: 300_000,
      },
    ).catch((err: { code?: number; stdout?: string; stderr?: string }) => err);
    const replayed = /Replayed (\d+) open workflow histor(?:y|ies) .*: (\d+) ok, (\d+) failed/.exec(
      check.stdout ?? '',
    );
    expect(replayed, `${check.stdout}\n${check.stderr}`).not.toBeNull();
    expect(Number(replayed![1])).toBeGreaterThan(1); // the batch and prompts in flight
    expect(Number(replayed![3])).toBe(0);

    // The switch: the old worker stops (its calls on the wire finish), the new one takes over.
    const stopped = await oldWorker.stop();
    expect(stopped.code, oldWorker.output()).toBe(0);
    const atSwitch = (await stats()).jobsCreated;
    const newWorker = background(['worker'], { cwd: folders.new, env: workerEnv });
    cleanups.push(() => newWorker.stop());
    await newWorker.waitFor(/vidbatch worker polling task queue/, 120_000);
    const watched = await vidbatch(['watch', batch], { cwd: folders.user, env: temporal });
    expect(watched.code, watched.stdout + watched.stderr).toBe(0);
    expect(watched.stdout).toContain(`${batch}: ${ROWS} succeeded, 0 failed of ${ROWS}`);

    const lines = (await readFile(join(shared.out, batch, 'manifest.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean);
    const rows = lines.map((l) => (JSON.parse(l) as { rowId: string }).rowId);
    expect(new Set(rows).size).toBe(ROWS);
    expect(rows).toHaveLength(ROWS);
    const s = await stats();
    expect(Object.keys(s.idempotencyKeysBilledMoreThanOnce)).toEqual([]);
    expect(s.jobsCreated).toBe(ROWS);

    console.log(
      `[upgrade] ${OLD} -> this checkout: ${atSwitch} jobs made before the switch; ` +
        `${replayed![1]} open histories replayed ok`,
    );
  }, 600_000);
});
