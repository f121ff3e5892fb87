// Path confinement as deployed: a spawned `vidbatch worker` refuses to read a CSV outside its input root (also
// through a symlink) and the batch pauses with the reason, the activities refuse outputs outside the out / download roots, and the
// in-process worker of `vidbatch run` reads a CSV from its own folder wherever that is.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createActivities } from '../../src/activities';
import type { PathRoots } from '../../src/activities/paths';
import { startBatch } from '../../src/client/batches';
import type { PromptResult } from '../../src/contract/prompt';
import { GatewayClient } from '../../src/gateway/client';
import { readManifest } from '../../src/results/manifest';
import { writeVbenchCsv } from '../../bench/vbench';
import { promptResult } from '../fixtures/prompt-result';
import { cliEnv, FAST_POLL, testEnv, waitForProgress, type TestEnv } from './helpers';

const CLI = fileURLToPath(new URL('../../bin/vidbatch.mjs', import.meta.url));

let env: TestEnv | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  await env?.close();
  env = undefined;
});

describe('a standalone worker confines CSVs to VIDBATCH_INPUT_ROOT', () => {
  it('pauses the batch with the reason for a CSV outside the root, or linked from inside it', async () => {
    env = await testEnv();
    const inbox = join(env.dir, 'inbox');
    await mkdir(inbox);
    const worker = spawn(process.execPath, [CLI, 'worker'], {
      env: cliEnv(env, { VIDBATCH_INPUT_ROOT: inbox, VIDBATCH_OUT_ROOT: join(env.dir, 'out') }),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(worker);
    // Drained, or a full pipe would block the worker's logging (and the worker); its tail explains a failure.
    let stderr = '';
    worker.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));

    const outside = join(env.dir, 'outside.csv');
    // Prompts no other test uses: a batch id is the CSV's hash, and the test files share one Temporal server (the
    // same 3 rows in another file attached this test to that file's finished batch).
    await writeVbenchCsv(outside, 3, 'all_dimension', 900);
    const outsideToo = join(env.dir, 'outside-too.csv');
    await writeVbenchCsv(outsideToo, 3, 'all_dimension', 905);
    const linked = join(inbox, 'linked.csv');
    await symlink(outsideToo, linked);

    // Another worker may allow the path, so the refusal is retried (about a minute); then the batch pauses
    // with the reason instead of failing and taking its prompts with it.
    const started = await Promise.all(
      [outside, linked].map((csv) =>
        startBatch(env!.session, csv, { poll: FAST_POLL, activityTimeoutMs: 5000 }),
      ),
    );
    for (const [i, csv] of [outside, linked].entries()) {
      const { handle } = started[i]!;
      const paused = await waitForProgress(handle, (p) => p.pauseKind === 'input', 150_000).catch(
        (err: Error) => {
          throw new Error(`${err.message}\nworker stderr (tail):\n${stderr}`);
        },
      );
      expect(paused.pausedReason).toContain(csv);
      expect(paused.pausedReason).toContain(inbox);
      expect(paused.pausedReason).toContain('VIDBATCH_INPUT_ROOT');
      expect((await handle.describe()).status.name).toBe('RUNNING');
      await handle.terminate().catch(() => undefined);
    }
    expect(env.sim.stats().jobsCreated).toBe(0);
    expect(worker.exitCode).toBeNull();

    // The same file inside the root runs.
    const inside = join(inbox, 'inside.csv');
    await writeVbenchCsv(inside, 3, 'all_dimension', 17);
    const { handle } = await startBatch(env.session, inside, {
      poll: FAST_POLL,
      outDir: join(env.dir, 'out', 'b'),
    });
    expect(await handle.result()).toMatchObject({ succeeded: 3, failed: 0 });
  }, 240_000);
});

describe('the activities confine outputs', () => {
  const result = (rowId: string): PromptResult =>
    promptResult(rowId, { finishedAt: new Date(0).toISOString() });

  it('recordResults and downloadVideo refuse folders outside their roots, batch ids and row ids that climb', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-confine-'));
    const roots: PathRoots = {
      input: [join(dir, 'in')],
      out: [join(dir, 'out')],
      download: [join(dir, 'videos')],
    };
    const gateway = new GatewayClient({
      baseUrl: 'http://127.0.0.1:9/v1',
      apiKey: () => 'sk-x',
      timeoutMs: 1000,
    });
    const activities = createActivities({ gateway, outRoot: join(dir, 'out'), roots });
    const mock = new MockActivityEnvironment();
    const refusal = async (p: Promise<unknown>) => {
      const err = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      // Retried as the activity's policy says: another worker, with other roots, may take the next attempt.
      expect(err).toMatchObject({ type: 'PathNotAllowed', nonRetryable: false });
      return (err as Error).message;
    };

    // Inside the root: written.
    const ok = await mock.run((): ReturnType<typeof activities.recordResults> =>
      activities.recordResults({ batchId: 'batch-1', results: [result('r1')] }),
    );
    expect(ok.manifestPath).toBe(join(dir, 'out', 'batch-1', 'manifest.jsonl'));
    expect((await readManifest(ok.manifestPath)).map((r) => r.rowId)).toEqual(['r1']);

    expect(
      await refusal(
        mock.run(() =>
          activities.recordResults({
            batchId: 'b',
            outDir: join(dir, 'elsewhere'),
            results: [result('r1')],
          }),
        ),
      ),
    ).toContain('VIDBATCH_OUT_ROOT');
    await refusal(
      mock.run(() => activities.recordResults({ batchId: '../../escape', results: [result('r1')] })),
    );
    expect(
      await refusal(
        mock.run(() =>
          activities.downloadVideo({
            url: 'http://127.0.0.1:9/x',
            dir: join(dir, 'out'),
            name: 'r1.mp4',
          }),
        ),
      ),
    ).toContain('VIDBATCH_DOWNLOAD_ROOT');
    await refusal(
      mock.run(() =>
        activities.downloadVideo({
          url: 'http://127.0.0.1:9/x',
          dir: join(dir, 'videos'),
          name: '../r1.mp4',
        }),
      ),
    );
    expect(
      await refusal(
        mock.run(() => activities.readRows({ csvPath: '/etc/passwd', csvSha256: 'x', offset: 0, limit: 1 })),
      ),
    ).toContain('VIDBATCH_INPUT_ROOT');
  });
});

describe('the in-process worker of `vidbatch run`', () => {
  it('reads a CSV from its own folder, outside the working directory', async () => {
    const cwd = await mkdtemp(join(tmpdir(), 'vidbatch-run-cwd-'));
    const elsewhere = await mkdtemp(join(tmpdir(), 'vidbatch-run-csv-'));
    const csv = join(elsewhere, 'prompts.csv');
    await writeVbenchCsv(csv, 2);
    const environment = { ...process.env };
    for (const name of ['TEMPORAL_ADDRESS', 'GATEWAY_BASE_URL', 'GATEWAY_API_KEY', 'VIDBATCH_INPUT_ROOT'])
      delete environment[name];
    const child = spawn(
      process.execPath,
      [CLI, 'run', csv, '--simulate', '--sim-job-seconds', '0.5', '--json'],
      { cwd, env: environment, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise((r) => child.once('exit', r));
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ succeeded: 2, failed: 0 });
    expect(stderr).not.toContain('PathNotAllowed');
  });
});
