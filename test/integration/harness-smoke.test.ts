// Small versions of `npm run bench` and `npm run chaos`, so the harnesses keep working. The real figures come
// from full runs (docs/benchmarks.md); nothing here is timed.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TSX = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));

describe('benchmark and chaos harnesses (smoke)', () => {
  it('bench runs vidbatch and the naive peer and reports every figure', async () => {
    const { stdout } = await run(
      TSX,
      ['bench/bench.ts', '--prompts', '10', '--job-seconds', '2', '--job-jitter', '1', '--json'],
      {
        cwd: ROOT,
        timeout: 150_000,
      },
    );
    const report = JSON.parse(stdout.slice(stdout.indexOf('\n{') + 1)) as {
      vidbatch: Record<string, number>;
      naivePeer: Record<string, number>;
    };
    expect(report.vidbatch).toMatchObject({ succeeded: 10, failed: 0 });
    expect(report.naivePeer).toMatchObject({ succeeded: 10 });
    for (const key of [
      'makespanS',
      'ratioToBound',
      'rateLimitedPerJob',
      'historyEventsPerPrompt',
      'actionsPerPrompt',
      'workerPeakRssMb',
    ]) {
      expect(report.vidbatch[key], key).toBeGreaterThanOrEqual(0);
    }
    expect(report.vidbatch.historyEventsPerPrompt).toBeGreaterThan(10);
  }, 180_000);

  it('chaos passes its checks after a worker kill and a server restart', async () => {
    // On a failure, what chaos printed (its checks, faults and events) is the assertion's message.
    const { stdout, failed } = await run(
      TSX,
      ['bench/chaos.ts', '--prompts', '40', '--kills', '2', '--give-up-after', '120'],
      {
        cwd: ROOT,
        timeout: 150_000,
      },
    ).then(
      ({ stdout }) => ({ stdout, failed: '' }),
      (err: { stdout?: string; stderr?: string; message: string }) => ({
        stdout: err.stdout ?? '',
        failed: `${err.message}\n${err.stdout ?? ''}\n${(err.stderr ?? '').slice(-4000)}`,
      }),
    );
    expect(failed, failed).toBe('');
    expect(stdout.match(/^ok /gm), stdout).toHaveLength(7); // the hostile default: idempotency off, 3 spend checks
    expect(stdout).not.toMatch(/^FAIL/m);
    expect(stdout).toContain('SIGKILL worker #1');
  }, 180_000);
});
