// The operator commands, run as the real CLI in separate processes against the test's dev server, while the
// test's worker runs the batches.
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'csv-stringify/sync';
import { gatewayTarget } from '../../src/config';
import { afterEach, describe, expect, it } from 'vitest';
import { parseCsv } from '../../src/input/csv';
import { readManifest } from '../../src/results/manifest';
import { startBatch } from '../../src/client/batches';
import { writeVbenchCsv } from '../../bench/vbench';
import { cliEnv, FAST_POLL, testEnv, waitForProgress, type TestEnv } from './helpers';

const CLI = fileURLToPath(new URL('../../bin/vidbatch.mjs', import.meta.url));

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

function cli(
  e: TestEnv,
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: e.dir,
      env: cliEnv(e, extraEnv),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('operator commands', () => {
  it('status, pause, set-concurrency, resume, watch, list, results and retry-failed on a live batch', async () => {
    env = await testEnv({
      // Long enough that the batch is still running after several spawned commands on a loaded machine.
      jobSeconds: 6,
      jobJitterSeconds: 0.3,
      faults: { moderationWords: ['forbidden'] },
    });
    await env.startWorker();
    const csv = join(env.dir, 'ops.csv');
    const prompts = [
      'a calm lake',
      'a forbidden scene',
      'a red kite',
      'a small boat',
      'a tall tree',
      'a snowy hill',
      'a quiet road',
      'a city at dusk',
    ];
    await writeFile(
      csv,
      stringify([['id', 'prompt', 'parameters.seed'], ...prompts.map((p, i) => [`r${i + 1}`, p, String(i)])]),
    );
    const { handle, batchId } = await startBatch(env.session, csv, {
      concurrency: 2,
      poll: FAST_POLL,
      outDir: join(env.dir, 'out', 'ops'),
    });
    await waitForProgress(handle, (p) => p.inFlight === 2);

    const status = await cli(env, ['status', batchId, '--json']);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({
      batchId,
      workflowStatus: 'RUNNING',
      progress: { total: 8, concurrency: 2 },
    });

    const paused = await cli(env, ['pause', 'ops.csv']); // by CSV: the same batch
    expect(paused.stdout, `${paused.code} ${paused.stderr}`).toContain(`${batchId}: pause requested`);
    const drained = await waitForProgress(
      handle,
      (p) => p.pausedReason === 'paused by operator' && p.inFlight === 0,
    );
    await new Promise((r) => setTimeout(r, 800));
    expect((await waitForProgress(handle, () => true)).started).toBe(drained.started);

    expect((await cli(env, ['set-concurrency', batchId, '0'])).code).toBe(2);
    const four = await cli(env, ['set-concurrency', batchId, '4']);
    expect(four.stdout, four.stderr).toContain('window is now 4');
    expect((await cli(env, ['resume', batchId])).stdout).toContain('resumed');
    const watched = await cli(env, ['watch', batchId]);
    expect(watched.stdout).toContain(`${batchId}: 7 succeeded, 1 failed of 8`);
    expect(watched.code).toBe(3);

    const history = JSON.parse((await cli(env, ['status', batchId, '--history', '--json'])).stdout) as {
      history: { prompts: number; eventsPerPrompt: number; batchRuns: number };
    };
    expect(history.history).toMatchObject({ prompts: 8, batchRuns: 1 });
    expect(history.history.eventsPerPrompt).toBeGreaterThan(10);

    const list = JSON.parse((await cli(env, ['list', '--json'])).stdout) as {
      batchId: string;
      workflowStatus: string;
      succeeded: number;
    }[];
    expect(list.find((b) => b.batchId === batchId)).toMatchObject({
      workflowStatus: 'COMPLETED',
      succeeded: 7,
      failed: 1,
    });

    const results = await cli(env, ['results', batchId]);
    expect(results.stdout).toContain('7 succeeded, 1 failed');
    const outDir = join(env.dir, 'out', 'ops', batchId);
    // Refused for its content, r2 is left out of failed.csv (run again as it is, it would be refused and
    // paid again): it is in left-out.csv, to edit, and results says so.
    expect(results.stdout).toContain('1 row(s) left out of failed.csv (they are in left-out.csv)');
    expect((await readFile(join(outDir, 'failed.csv'), 'utf8')).trim().split('\n')).toHaveLength(1); // header
    const failedCsv = parseCsv(await readFile(join(outDir, 'left-out.csv')), 'left-out.csv');
    expect(failedCsv.problems).toEqual([]);
    expect(failedCsv.rows).toMatchObject([
      { id: 'r2', prompt: 'a forbidden scene', parameters: { seed: 1, resolution: '720P', duration: 5 } },
    ]);
    expect((await readFile(join(outDir, 'succeeded.csv'), 'utf8')).trim().split('\n')).toHaveLength(8);
    expect(await readFile(join(outDir, 'failed-errors.csv'), 'utf8')).toContain('content_moderation');
    await cli(env, ['results', batchId, '--format', 'jsonl']);
    expect((await readFile(join(outDir, 'failed.jsonl'), 'utf8')).trim().split('\n')).toHaveLength(1);

    // The batch downloaded every video beside its manifest: `download` finds them all, fetches nothing.
    const downloaded = await cli(env, ['download', batchId]);
    expect(downloaded.stdout).toContain('7 videos on disk, verified: 7 already there, 0 fetched');
    expect(downloaded.stdout).toContain('; 0 failed');
    expect(downloaded.code).toBe(0);
    expect((await readFile(join(outDir, 'r1.mp4'))).subarray(4, 8).toString('latin1')).toBe('ftyp');

    const retried = await cli(env, ['retry-failed', batchId, '--code', 'content_moderation', '--detach']);
    const retryId = /Started (batch-[0-9a-f]{16}-[0-9a-f]{8}): 1 failed rows/.exec(retried.stderr)?.[1];
    expect(retryId).toBeDefined();
    expect(retryId).not.toBe(batchId);
    const retryHandle = env.client.workflow.getHandle(retryId!);
    expect(await retryHandle.result()).toMatchObject({ total: 1, failed: 1 });
    expect((await retryHandle.describe()).memo).toEqual({
      retryOf: batchId,
      csvPath: expect.stringMatching(/\.csv$/) as unknown,
      // It pays on the original's account: the target its workers declare.
      target: gatewayTarget(env.sim.baseUrl),
    });
  });

  it('cancel keeps finished rows and records in-flight ones with their job id', async () => {
    env = await testEnv({ jobSeconds: 0.4 });
    await env.startWorker();
    const csv = join(env.dir, 'cancel.csv');
    await writeVbenchCsv(csv, 6, 'all_dimension', 900);
    const { handle, batchId } = await startBatch(env.session, csv, {
      concurrency: 2,
      poll: FAST_POLL,
      outDir: join(env.dir, 'out'),
    });
    await waitForProgress(handle, (p) => p.succeeded >= 2);
    env.sim.state.options.jobSeconds = 60; // the rest will still be running when we cancel
    const fastJobs = env.sim.stats().jobsCreated;
    // Both rows in flight have submitted slow jobs (made after the switch: a fast one still in flight would
    // finish before the cancel, and the row after it might not have submitted yet).
    await waitForProgress(
      handle,
      (p) =>
        p.inFlight === 2 &&
        env!.sim.stats().jobsCreated >= fastJobs + 2 &&
        env!.sim.stats().jobsCreated === p.succeeded + p.failed + 2,
    );
    expect((await cli(env, ['cancel', batchId])).stdout).toContain('cancellation requested');
    await expect(handle.result()).rejects.toThrow();
    expect((await handle.describe()).status.name).toBe('CANCELLED');
    const manifest = await readManifest(join(env.dir, 'out', batchId, 'manifest.jsonl'));
    const cancelled = manifest.filter((r) => r.errorCode === 'cancelled');
    expect(manifest.filter((r) => r.status === 'succeeded').length).toBeGreaterThanOrEqual(2);
    expect(cancelled).toHaveLength(2);
    for (const r of cancelled) expect(r.jobId).toMatch(/^vid_/);
  });

  it('doctor checks the key, the models and Temporal; run --dry-run shows the plan', async () => {
    env = await testEnv();
    const csv = join(env.dir, 'doc.csv');
    await writeFile(
      csv,
      stringify([
        ['prompt', 'model', 'resolution'],
        ['a', 'modelfamily-1.1-r2v', '1080P'],
        ['b', '', ''],
        ['c', '', ''],
      ]),
    );
    const ok = await cli(env, ['doctor', 'doc.csv']);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/ok +models: available: modelfamily-1\.1-r2v, modelfamily-1\.0-r2v/);
    const wrong = await cli(env, ['doctor'], { GATEWAY_API_KEY: 'sk-wrong' });
    expect(wrong.code).toBe(2);
    expect(wrong.stdout).toContain('FAIL gateway key: 401');
    expect(wrong.stdout).not.toContain('sk-wrong');
    [...env.sim.state.keys.values()][0]!.enabled = false;
    expect((await cli(env, ['doctor'])).stdout).toContain('FAIL gateway key: 403');
    expect((await cli(env, ['doctor'], { GATEWAY_BASE_URL: '' })).stdout).toContain(
      'FAIL gateway settings: GATEWAY_BASE_URL is not set',
    );

    const dry = await cli(env, ['run', 'doc.csv', '--dry-run']);
    expect(JSON.parse(dry.stdout)).toMatchObject({
      rows: 3,
      byModel: { 'modelfamily-1.1-r2v': 1, 'modelfamily-1.0-r2v': 2 },
      byResolution: { '1080P': 1, '720P': 2 },
      byDuration: { '5': 3 },
    });
    expect(env.sim.stats().jobsCreated).toBe(0);
  });
});
