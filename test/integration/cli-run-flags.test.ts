// `vidbatch run` flags, end to end: the real command (spawned) against the test's Temporal server, with this
// test's worker and simulator; checks exit code, output, manifest, files and the simulator's counters.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { writeVbenchCsv } from '../../bench/vbench';
import { looksLikeMp4 } from '../../src/results/download';
import { readManifest } from '../../src/results/manifest';
import { vidbatch, type CliRun } from './cli-helpers';
import { testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const FAST = ['--first-poll', '0.3', '--poll-interval', '0.2', '--poll-cap', '1', '--no-adaptive-poll'];

function run(e: TestEnv, args: string[], extraEnv: Record<string, string> = {}): Promise<CliRun> {
  return vidbatch(['run', ...args, ...FAST], {
    cwd: e.dir,
    env: {
      TEMPORAL_ADDRESS: e.address,
      VIDBATCH_TASK_QUEUE: e.taskQueue,
      GATEWAY_BASE_URL: e.sim.baseUrl,
      GATEWAY_API_KEY: e.sim.apiKey,
      ...extraEnv,
    },
  });
}

/** The manifest path the summary line names. */
function manifestOf(r: CliRun): string {
  const path = /Manifest: (\S+manifest\.jsonl)/.exec(r.stdout)?.[1];
  if (!path) throw new Error(`no manifest in output:\n${r.stdout}\n${r.stderr}`);
  return path;
}

/** n prompts, the ones at `forbidden` (1-based) containing the simulator's moderation word. */
async function moderatedCsv(path: string, n: number, forbidden: number[]): Promise<void> {
  const lines = ['id,prompt'];
  for (let i = 1; i <= n; i++)
    lines.push(`r${i},${forbidden.includes(i) ? 'a forbidden scene' : `a calm lake ${i}`}`);
  await writeFile(path, lines.join('\n') + '\n');
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

describe('vidbatch run: guard rails and downloads from the command line', () => {
  it('--max-submissions 5 submits at most 5 jobs, stops early and exits 3', async () => {
    env = await testEnv({ jobSeconds: 0.5, jobJitterSeconds: 0.1 });
    await env.startWorker();
    await writeVbenchCsv(join(env.dir, 'p.csv'), 12);
    const r = await run(env, ['p.csv', '--concurrency', '2', '--max-submissions', '5']);
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(/5 succeeded, 0 failed of 12/);
    expect(r.stdout).toContain(
      'Stopped early: 5 jobs submitted (--max-submissions 5); 7 rows not submitted.',
    );
    expect(env.sim.stats().jobsCreated).toBeLessThanOrEqual(5);
    expect(await readManifest(manifestOf(r))).toHaveLength(5);
  });

  it('--download <dir> puts a verified .mp4 of every row there, hashed in the manifest', async () => {
    env = await testEnv({ jobSeconds: 0.4, jobJitterSeconds: 0.1 });
    await env.startWorker();
    await writeVbenchCsv(join(env.dir, 'd.csv'), 3);
    const r = await run(env, ['d.csv', '--download', 'videos']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/3 succeeded, 0 failed of 3/);
    const files = (await filesUnder(join(env.dir, 'videos'))).filter((f) => f.endsWith('.mp4'));
    expect(files.map((f) => f.split('/').pop()).sort()).toEqual(['vb-1.mp4', 'vb-2.mp4', 'vb-3.mp4']);
    for (const f of files) expect(looksLikeMp4(await readFile(f))).toBe(true);
    const manifest = await readManifest(manifestOf(r));
    expect(
      manifest.map((row) => [/^[0-9a-f]{64}$/.test(row.sha256 ?? ''), row.file?.endsWith('.mp4')]),
    ).toEqual([
      [true, true],
      [true, true],
      [true, true],
    ]);
  });

  it('--max-failures 2 stops after the second failed row', async () => {
    env = await testEnv({ jobSeconds: 0.3, jobJitterSeconds: 0, faults: { moderationWords: ['forbidden'] } });
    await env.startWorker();
    await moderatedCsv(join(env.dir, 'f.csv'), 10, [2, 3, 4]);
    const r = await run(env, ['f.csv', '--concurrency', '1', '--max-failures', '2']);
    expect(r.code).toBe(3);
    expect(r.stdout).toContain('Stopped early: 2 rows failed (--max-failures 2); 7 rows not submitted.');
    expect(env.sim.stats().jobsCreated).toBe(3);
  });

  it('--max-failure-rate 0.3 stops a batch failing too often', async () => {
    env = await testEnv({ jobSeconds: 0.2, jobJitterSeconds: 0, faults: { moderationWords: ['forbidden'] } });
    await env.startWorker();
    await moderatedCsv(join(env.dir, 'r.csv'), 16, [1, 2, 3, 4, 5]);
    const r = await run(env, ['r.csv', '--concurrency', '1', '--max-failure-rate', '0.3']);
    expect(r.code).toBe(3);
    expect(r.stdout).toContain(
      '5 of 10 finished rows failed (--max-failure-rate 0.3); 6 rows not submitted.',
    );
    expect(env.sim.stats().jobsCreated).toBe(10);
  });

  it('--batch-deadline 2 submits nothing after 2 s and ends cleanly', async () => {
    env = await testEnv({ jobSeconds: 1, jobJitterSeconds: 0 });
    await env.startWorker();
    await writeVbenchCsv(join(env.dir, 't.csv'), 20);
    const r = await run(env, ['t.csv', '--concurrency', '1', '--batch-deadline', '2']);
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(/Stopped early: the batch deadline passed; \d+ rows not submitted\./);
    const notStarted = Number(/(\d+) rows not submitted/.exec(r.stdout)?.[1]);
    expect(notStarted).toBeGreaterThan(10);
    expect(env.sim.stats().jobsCreated).toBe(20 - notStarted);
  });

  it('refuses a bad value with exit 2 and the flag named, before starting anything', async () => {
    env = await testEnv();
    await writeVbenchCsv(join(env.dir, 'x.csv'), 2);
    const r = await run(env, ['x.csv', '--max-failure-rate', '1.5']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("option '--max-failure-rate <p>' argument '1.5' is invalid");
    expect(env.sim.stats().jobsCreated).toBe(0);
  });
});
