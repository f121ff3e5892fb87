// Worker observability: Prometheus metrics (Temporal runtime + vidbatch counters) and JSON logs without secrets.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'csv-stringify/sync';
import { afterEach, describe, expect, it } from 'vitest';
import { startBatch } from '../../src/client/batches';
import { freePort } from '../../src/dev-server/dev-server';
import { cliEnv, FAST_POLL, testEnv, type TestEnv } from './helpers';

const CLI = fileURLToPath(new URL('../../bin/vidbatch.mjs', import.meta.url));
let env: TestEnv | undefined;
let worker: ChildProcess | undefined;
afterEach(async () => {
  worker?.kill('SIGKILL');
  await env?.close();
  env = undefined;
});

/** The value of a Prometheus sample whose line starts with `prefix` and contains every label in `labels`. */
function sample(metrics: string, name: string, labels: string[] = []): number {
  const line = metrics
    .split('\n')
    .find((l) => l.startsWith(name) && labels.every((label) => l.includes(label)));
  return line ? Number(line.split(' ').pop()) : NaN;
}

describe('worker observability', () => {
  it('exports Prometheus metrics with vidbatch counters, and JSON logs without the API key', async () => {
    env = await testEnv({
      jobSeconds: 0.3,
      rateLimit: 3,
      burst: 3,
      faults: { moderationWords: ['forbidden'] },
    });
    const port = await freePort();
    let stderr = '';
    worker = spawn(process.execPath, [CLI, 'worker', '--metrics', `127.0.0.1:${port}`], {
      env: cliEnv(env, {
        VIDBATCH_LOG_FORMAT: 'json',
        VIDBATCH_LOG_LEVEL: 'INFO',
        VIDBATCH_OUT_ROOT: join(env.dir, 'out'),
      }),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    worker.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const csv = join(env.dir, 'obs.csv');
    const prompts = [
      'a forbidden scene',
      'a pond',
      'a kite',
      'a barn',
      'a creek',
      'a dune',
      'a pier',
      'a fern',
    ];
    await writeFile(csv, stringify([['id', 'prompt'], ...prompts.map((p, i) => [`o${i}`, p])]));
    const { handle } = await startBatch(env.session, csv, {
      concurrency: 8,
      poll: FAST_POLL,
      outDir: join(env.dir, 'out'),
    });
    expect(await handle.result()).toMatchObject({ succeeded: 7, failed: 1 });

    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(sample(metrics, 'vidbatch_jobs_submitted_total')).toBe(8);
    expect(
      sample(metrics, 'vidbatch_jobs_finished_total', ['status="failed"', 'code="content_moderation"']),
    ).toBe(1);
    expect(sample(metrics, 'vidbatch_jobs_finished_total', ['status="succeeded"'])).toBe(7);
    const limited = env.sim.stats().rateLimited;
    expect(limited).toBeGreaterThan(0);
    const counted = metrics
      .split('\n')
      .filter((l) => l.startsWith('vidbatch_rate_limited_total'))
      .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
    expect(counted).toBe(limited);
    expect(metrics).toMatch(/^temporal_\w+/m);

    const lines = stderr.split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) expect(() => JSON.parse(line) as unknown, line).not.toThrow();
    expect(stderr).not.toContain(env.sim.apiKey);
  });
});
