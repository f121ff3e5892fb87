// Two terminals in one folder, as a user opens them: a `--simulate` try-out and a real run against another
// gateway (a second simulator with its own key), at once, on the folder's embedded server. No row of either
// reaches the other's gateway, and both exit 0 although the one that owns the embedded server ends first.
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readManifest } from '../../src/results/manifest';
import { startSimulator, type Simulator } from '../../src/simulator/server';
import { background } from './cli-helpers';

let other: Simulator | undefined;
afterEach(async () => {
  await other?.close();
  other = undefined;
});

const FAST = ['--first-poll', '0.5', '--poll-interval', '0.3', '--poll-cap', '1', '--no-adaptive-poll'];

async function csv(dir: string, name: string, words: string, n: number): Promise<string[]> {
  const prompts = Array.from({ length: n }, (_, i) => `${words} ${i + 1}`);
  await writeFile(
    join(dir, name),
    ['id,prompt', ...prompts.map((p, i) => `r${i + 1},${p}`)].join('\n') + '\n',
  );
  return prompts;
}

describe('two terminals in one folder', () => {
  it('a --simulate try-out and a run on another gateway never touch each other, and both exit 0', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-two-'));
    const tag = randomUUID().slice(0, 8);
    const tryPrompts = await csv(dir, 'try.csv', `a try-out lighthouse ${tag}`, 8);
    const realPrompts = await csv(dir, 'real.csv', `a paid harbour scene ${tag}`, 8);
    // The "paid" gateway: its own simulator and key. Its jobs (30 s) outlast the try-out's (15 s), which are
    // long enough that the try-out still runs when the real run starts, even on a loaded machine.
    other = await startSimulator({
      apiKeys: ['sk-the-paid-gateway-key'],
      jobSeconds: 30,
      jobJitterSeconds: 1,
    });

    // The try-out starts first, so it owns the folder's embedded server; the real run uses that server.
    const tryOut = background(['run', 'try.csv', '--simulate', '--sim-job-seconds', '15', ...FAST], {
      cwd: dir,
    });
    await tryOut.waitFor(/Started batch batch-[0-9a-f]{16}-[0-9a-f]{8}/, 120_000);
    const real = background(['run', 'real.csv', '--concurrency', '4', ...FAST], {
      cwd: dir,
      env: { GATEWAY_BASE_URL: other.baseUrl, GATEWAY_API_KEY: 'sk-the-paid-gateway-key' },
    });
    await real.waitFor(/Started batch batch-[0-9a-f]{16}-[0-9a-f]{8}/, 120_000);

    const [t, r] = await Promise.all([tryOut.done, real.done]);
    expect(t.code, t.stderr).toBe(0);
    expect(r.code, r.stderr).toBe(0);
    // The try-out ended first and kept the server up for the other terminal instead of cutting it off.
    expect(t.stderr).toMatch(/Keeping the embedded Temporal server up for the other vidbatch process/);
    expect(t.stdout).toMatch(/8 succeeded, 0 failed of 8/);
    expect(r.stdout).toMatch(/8 succeeded, 0 failed of 8/);

    // The paid gateway made exactly the real run's jobs: no try-out prompt reached it.
    const paid = [...other.state.jobs.values()].map((j) => j.prompt).sort();
    expect(paid).toEqual([...realPrompts].sort());
    // The try-out's simulator made exactly the try-out's jobs.
    const simulated = JSON.parse(await readFile(join(dir, '.vidbatch', 'simulator-state.json'), 'utf8')) as {
      jobs: { prompt: string }[];
    };
    expect(simulated.jobs.map((j) => j.prompt).sort()).toEqual([...tryPrompts].sort());

    // Each batch's results hold its own prompts, from its own gateway.
    const batchOf = (out: string) => /(batch-[0-9a-f]{16}-[0-9a-f]{8}): 8 succeeded/.exec(out)![1]!;
    const rows = async (out: string) => readManifest(join(dir, 'out', batchOf(out), 'manifest.jsonl'));
    const tryRows = await rows(t.stdout);
    const realRows = await rows(r.stdout);
    expect(tryRows.map((m) => m.prompt).sort()).toEqual([...tryPrompts].sort());
    expect(realRows.map((m) => m.prompt).sort()).toEqual([...realPrompts].sort());
    expect(realRows.every((m) => m.url?.startsWith(other!.origin))).toBe(true);
    expect(tryRows.some((m) => m.url?.startsWith(other!.origin))).toBe(false);
  }, 300_000);
});
