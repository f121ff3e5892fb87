// Nothing is bought again by accident, from the command line: the real `vidbatch` (spawned) against this test's
// Temporal server, worker and a simulator that ignores Idempotency-Key (every POST is a new, billable job).
// Rows refused for their content and rows whose job the gateway forgot are not paid again by a re-run; a
// deliberate `retry-failed --code <code>` pays exactly once more per row, and so does `--code no_video_url`.
// The simulator's own job list is the count.
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readManifest } from '../../src/results/manifest';
import { background, vidbatch, type CliRun } from './cli-helpers';
import { cliSettings, testEnv, waitForProgress, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const FAST = ['--first-poll', '0.5', '--poll-interval', '0.5', '--poll-cap', '1', '--no-adaptive-poll'];

const command = (e: TestEnv, args: string[]) => vidbatch(args, { cwd: e.dir, env: cliSettings(e) });
const output = (r: CliRun) => r.stdout + r.stderr;

/** A CSV of `prompts` (row ids r1, r2, ...), unique to this test: tests share one Temporal server. */
async function csvOf(e: TestEnv, prompts: string[]): Promise<{ csv: string; tag: string }> {
  const tag = randomUUID().slice(0, 8);
  const lines = ['id,prompt', ...prompts.map((p, i) => `r${i + 1},${p} ${tag} ${i + 1}`)];
  await writeFile(join(e.dir, 'p.csv'), lines.join('\n') + '\n');
  return { csv: 'p.csv', tag };
}

/** Jobs the simulator made per row ("... <tag> 7" -> r7). */
function jobsPerRow(e: TestEnv): Record<string, number> {
  const perRow: Record<string, number> = {};
  for (const job of e.sim.state.jobs.values()) {
    const row = `r${/ (\d+)$/.exec(job.prompt)?.[1]}`;
    perRow[row] = (perRow[row] ?? 0) + 1;
  }
  return perRow;
}

async function finalRows(e: TestEnv, batchId: string) {
  const rows = await readManifest(join(e.dir, 'out', batchId, 'manifest.jsonl')).catch(() => []);
  return Object.fromEntries(rows.map((r) => [r.rowId, r]));
}

/** Runs the CSV in the background and cancels its batch once `failed` rows failed, the next ones in flight. */
async function runAndCancel(e: TestEnv, csv: string, failed: number, concurrency: number) {
  const p = background(['run', csv, '--concurrency', String(concurrency), ...FAST], {
    cwd: e.dir,
    env: cliSettings(e),
  });
  const batchId = (await p.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
  await waitForProgress(e.client.workflow.getHandle(batchId), (p) => p.failed >= failed);
  const cancelled = await command(e, ['cancel', batchId]);
  expect(cancelled.code, output(cancelled)).toBe(0);
  await p.done;
  return batchId;
}

describe('nothing is bought again by accident (spawned vidbatch, Idempotency-Key ignored)', () => {
  it('a re-run of a cancelled batch leaves content refusals alone; retry-failed --code sends each once', async () => {
    env = await testEnv({ jobSeconds: 1, jobJitterSeconds: 0, faults: { moderationWords: ['forbidden'] } });
    await env.startWorker();
    const prompts = [
      'a forbidden scene',
      'another forbidden scene',
      ...Array.from({ length: 10 }, () => 'a calm lake'),
    ];
    const { csv, tag } = await csvOf(env, prompts);
    const batchId = await runAndCancel(env, csv, 2, 2);
    const first = await finalRows(env, batchId);
    expect(first.r1).toMatchObject({ status: 'failed', errorCode: 'content_moderation' });
    expect(first.r2).toMatchObject({ status: 'failed', errorCode: 'content_moderation' });

    const rerun = await command(env, ['run', csv, ...FAST]);
    expect(rerun.stdout, output(rerun)).toMatch(/10 succeeded, 2 failed of 12/);
    const afterRerun = jobsPerRow(env);
    console.log(`re-run of the cancelled batch: jobs per row ${JSON.stringify(afterRerun)}`);
    expect(afterRerun).toMatchObject({ r1: 1, r2: 1 }); // not sent again
    expect(Object.values(afterRerun).every((n) => n === 1)).toBe(true); // cancelled jobs checked, not paid again

    // Another file with the refused requests (and one done earlier) sends none of them.
    await writeFile(
      join(env.dir, 'other.csv'),
      `id,prompt\nx1,a forbidden scene ${tag} 1\nx2,another forbidden scene ${tag} 2\nx3,a calm lake ${tag} 3\n`,
    );
    const planned = await command(env, ['plan', 'other.csv']);
    expect((JSON.parse(planned.stdout) as { reuse: object }).reuse).toMatchObject({
      settled: 2,
      reused: 1,
      newJobs: 0,
    });
    const other = await command(env, ['run', 'other.csv', ...FAST]);
    expect(other.stdout, output(other)).toMatch(/1 succeeded, 2 failed of 3/);
    expect(jobsPerRow(env)).toEqual(afterRerun);

    // retry-failed without --code leaves them out and says why; `results` too.
    const all = await command(env, ['retry-failed', batchId, ...FAST]);
    expect(all.stderr).toContain(
      `2 row(s) left out: the gateway refused their content; sent unchanged it would refuse it again (content_moderation); \`vidbatch retry-failed ${batchId} --code content_moderation\``,
    );
    expect(all.stdout).toContain('no failed rows besides those left out; nothing to retry');
    const results = await command(env, ['results', batchId]);
    expect(results.stdout).toContain('2 row(s) left out of failed.csv (they are in left-out.csv)');
    const leftOut = await readFile(join(env.dir, 'out', batchId, 'left-out.csv'), 'utf8');
    expect(leftOut.trim().split('\n')).toHaveLength(3);
    expect(jobsPerRow(env)).toEqual(afterRerun);

    // Deliberately: one new job per refused row, none for the others.
    const retry = await command(env, ['retry-failed', batchId, '--code', 'content_moderation', ...FAST]);
    expect(retry.stderr, output(retry)).toMatch(/Started batch-[0-9a-f]{16}-[0-9a-f]{8}: 2 failed rows of/);
    expect(jobsPerRow(env)).toEqual({ ...afterRerun, r1: 2, r2: 2 });
  });

  it('retry-failed pays once more for a row whose job failed, every time it is run, and a new file follows the last job', async () => {
    env = await testEnv({ jobSeconds: 0.5, jobJitterSeconds: 0, faults: { jobFailure: 1 } });
    await env.startWorker();
    const { csv, tag } = await csvOf(env, ['a red kite', 'a blue kite']);
    const first = await command(env, ['run', csv, ...FAST]);
    expect(first.stdout, output(first)).toMatch(/0 succeeded, 2 failed of 2/);
    const batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(first.stdout)![1]!;
    const retried: string[] = [];
    // While the gateway still fails them, each retry-failed of the batch pays for one more job per row: the
    // second retries the rows that failed in the first retry, the third those of the second.
    for (const jobs of [2, 3]) {
      const retry = await command(env, ['retry-failed', batchId, ...FAST]);
      expect(retry.stdout, output(retry)).toMatch(/0 succeeded, 2 failed of 2/);
      retried.push(/Started (batch-[0-9a-f]{16}-[0-9a-f]{8}): 2 failed rows of/.exec(retry.stderr)![1]!);
      expect(jobsPerRow(env)).toEqual({ r1: jobs, r2: jobs });
    }
    expect(new Set([batchId, ...retried]).size).toBe(3);
    const third = await command(env, ['retry-failed', batchId, ...FAST]);
    expect(third.stderr).toContain(`${retried[1]}, the retry-failed of ${retried[0]}, has completed`);
    expect(jobsPerRow(env)).toEqual({ r1: 4, r2: 4 });

    // Once the gateway makes videos, the next retry brings them home, and a new file with the same requests
    // follows those jobs instead of the failed ones.
    env.sim.setFaults({ jobFailure: 0 });
    const fourth = await command(env, ['retry-failed', batchId, ...FAST]);
    expect(fourth.stdout, output(fourth)).toMatch(/2 succeeded, 0 failed of 2/);
    expect(jobsPerRow(env)).toEqual({ r1: 5, r2: 5 });
    await writeFile(
      join(env.dir, 'other.csv'),
      `id,prompt\nx1,a red kite ${tag} 1\nx2,a blue kite ${tag} 2\n`,
    );
    const other = await command(env, ['run', 'other.csv', ...FAST]);
    expect(other.stdout, output(other)).toMatch(/2 succeeded, 0 failed of 2/);
    expect(jobsPerRow(env)).toEqual({ r1: 5, r2: 5 });
  });

  it('retry-failed --code no_video_url pays for a new job per row instead of asking the same job again', async () => {
    env = await testEnv({ jobSeconds: 0.5, jobJitterSeconds: 0, faults: { jobNoUrl: 1 } });
    await env.startWorker();
    const { csv } = await csvOf(env, ['a red kite', 'a blue kite', 'a green kite']);
    const first = await command(env, ['run', csv, ...FAST]);
    expect(first.stdout, output(first)).toMatch(/0 succeeded, 3 failed of 3/);
    const batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(first.stdout)![1]!;
    expect(Object.values(await finalRows(env, batchId)).map((r) => r.errorCode)).toEqual([
      'no_video_url',
      'no_video_url',
      'no_video_url',
    ]);

    env.sim.setFaults({ jobNoUrl: 0 }); // new jobs come with their URL
    const retry = await command(env, ['retry-failed', batchId, '--code', 'no_video_url', ...FAST]);
    console.log(`retry-failed --code no_video_url: jobs per row ${JSON.stringify(jobsPerRow(env))}`);
    expect(retry.stdout, output(retry)).toMatch(/3 succeeded, 0 failed of 3/);
    expect(jobsPerRow(env)).toEqual({ r1: 2, r2: 2, r3: 2 });
  });

  it('a job the gateway forgot (404, or status UNKNOWN) ends job_gone with its id; a re-run pays nothing for it', async () => {
    env = await testEnv({
      jobSeconds: 1,
      jobJitterSeconds: 0,
      faults: { goneWords: ['forgotten'], unknownStatusWords: ['vanished'] },
    });
    await env.startWorker();
    const prompts = [
      'a forgotten harbour',
      'a vanished harbour',
      ...Array.from({ length: 10 }, () => 'a harbour'),
    ];
    const { csv } = await csvOf(env, prompts);
    const batchId = await runAndCancel(env, csv, 2, 2);
    const first = await finalRows(env, batchId);
    const jobOf = (row: string) =>
      [...env!.sim.state.jobs.values()].find((j) => j.prompt.endsWith(` ${row.slice(1)}`))!.id;
    expect(first.r1).toMatchObject({ status: 'failed', errorCode: 'job_gone', jobId: jobOf('r1') });
    expect(first.r1!.errorMessage).toContain('(404)');
    expect(first.r2).toMatchObject({ status: 'failed', errorCode: 'job_gone', jobId: jobOf('r2') });
    expect(first.r2!.errorMessage).toContain('status "UNKNOWN"');

    const rerun = await command(env, ['run', csv, ...FAST]);
    expect(rerun.stdout, output(rerun)).toMatch(/10 succeeded, 2 failed of 12/);
    const afterRerun = jobsPerRow(env);
    console.log(`re-run with two forgotten jobs: jobs per row ${JSON.stringify(afterRerun)}`);
    expect(Object.values(afterRerun).every((n) => n === 1)).toBe(true);
    const again = await finalRows(env, batchId);
    expect(again.r1).toMatchObject({ errorCode: 'job_gone', jobId: jobOf('r1') });
    expect(again.r2).toMatchObject({ errorCode: 'job_gone', jobId: jobOf('r2') });

    const retry = await command(env, ['retry-failed', batchId, '--code', 'job_gone', ...FAST]);
    expect(retry.stderr, output(retry)).toMatch(/Started batch-[0-9a-f]{16}-[0-9a-f]{8}: 2 failed rows of/);
    expect(jobsPerRow(env)).toEqual({ ...afterRerun, r1: 2, r2: 2 });
  });
});
