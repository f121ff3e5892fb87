// The pre-deploy check: scripts/replay-check.ts replays the open batch and prompt workflows of a server
// against the workflow code, passing for this checkout's code and failing, naming each run, for incompatible code.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startBatch } from '../../src/client/batches';
import { writeVbenchCsv } from '../../bench/vbench';
import { FAST_POLL, testEnv, waitForProgress, type TestEnv } from './helpers';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SCRIPT = join(ROOT, 'scripts', 'replay-check.ts');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');
const INCOMPATIBLE = join(ROOT, 'test', 'fixtures', 'incompatible-workflows.ts');

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

function replayCheck(
  args: string[],
  address: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      TSX,
      [SCRIPT, ...args],
      { cwd: ROOT, env: { ...process.env, TEMPORAL_ADDRESS: address } },
      (err, stdout, stderr) =>
        resolve({ code: err ? ((err.code as number | undefined) ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('scripts/replay-check.ts', () => {
  it('replays the open workflows of a running batch: ok with this code, each run named with incompatible code', async () => {
    // Jobs last a minute, so the batch and its prompts stay open while the check runs.
    env = await testEnv({ jobSeconds: 60 });
    await env.startWorker();
    const csv = join(env.dir, 'long.csv');
    await writeVbenchCsv(csv, 2);
    const { handle, batchId } = await startBatch(env.session, csv, {
      poll: { ...FAST_POLL, firstPollMs: 60_000 },
      outDir: join(env.dir, 'out'),
    });
    await waitForProgress(handle, (p) => p.inFlight === 2);
    const query = `BatchId = '${batchId}' AND ExecutionStatus = 'Running'`;

    const ok = await replayCheck(['--query', query], env.address);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('Replayed 3 open workflow histories');
    expect(ok.stdout).toContain('3 ok, 0 failed');

    const bad = await replayCheck(['--query', query, '--workflows', INCOMPATIBLE], env.address);
    expect(bad.code, bad.stderr).toBe(1);
    expect(bad.stdout).toContain('0 ok, 3 failed');
    for (const id of [batchId, `${batchId}/vb-1`, `${batchId}/vb-2`])
      expect(bad.stdout).toContain(`  ${id} (`);
    expect(bad.stdout).toContain('patched()');

    await handle.terminate();
  });

  it('exits 2 without TEMPORAL_ADDRESS', async () => {
    const run = await replayCheck([], '');
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('TEMPORAL_ADDRESS is not set');
  });
});
