// A request is paid once per output root, whatever file it comes from: the real `vidbatch` (spawned) against
// this test's Temporal server, worker and simulator, which ignores Idempotency-Key (the worst case: only
// vidbatch's own records stop a second payment). The simulator's job counter is the bill.
import { randomUUID } from 'node:crypto';
import { stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'csv-stringify/sync';
import { afterEach, describe, expect, it } from 'vitest';
import { vbenchPrompts } from '../../bench/vbench';
import type { PromptResult } from '../../src/contract/prompt';
import { readManifest } from '../../src/results/manifest';
import {
  background,
  FAST_POLL_FLAGS,
  manifestPathOf,
  exitAndOutput,
  runIn,
  vidbatchIn,
  type CliRun,
} from './cli-helpers';
import { cliSettings, testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

async function writeCsv(e: TestEnv, name: string, rows: [id: string, prompt: string][]): Promise<void> {
  await writeFile(join(e.dir, name), stringify([['id', 'prompt'], ...rows]));
}

const manifestOf = (r: CliRun): Promise<PromptResult[]> => readManifest(manifestPathOf(r));

/** Waits until the simulator made `n` jobs (a minute at most). */
async function jobsMade(e: TestEnv, n: number, output: () => string): Promise<void> {
  for (let i = 0; e.sim.stats().jobsCreated < n; i++) {
    if (i > 600) throw new Error(`${n} jobs never made:\n${output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const reuseOf = (r: CliRun) => (JSON.parse(r.stdout) as { reuse: unknown }).reuse;
const batchOf = (r: CliRun) => /(batch-[0-9a-f]{16}-[0-9a-f]{8}):/.exec(r.stdout)?.[1];

describe('pay once per request in an output root (spawned vidbatch, simulator ignoring Idempotency-Key)', () => {
  it('an edited and extended file pays for the new rows only; the same rows reordered pay nothing', async () => {
    env = await testEnv({ idempotency: false });
    await env.startWorker();
    const tag = randomUUID().slice(0, 8);
    const prompts = (await vbenchPrompts()).slice(0, 21).map((p) => `${p} (${tag})`);
    const rows: [string, string][] = prompts.slice(0, 20).map((p, i) => [`r${i + 1}`, p]);
    await writeCsv(env, 'a.csv', rows);
    const first = await runIn(env, 'a.csv');
    expect(first.code, exitAndOutput(first)).toBe(0);
    expect(env.sim.stats().jobsCreated).toBe(20);
    const batchA = batchOf(first)!;

    // One prompt fixed, one row added: two new requests.
    const edited: [string, string][] = [...rows, ['r21', prompts[20]!]];
    edited[4] = ['r5', `${rows[4]![1]} at dusk`];
    await writeCsv(env, 'b.csv', edited);
    const planned = await vidbatchIn(env, ['plan', 'b.csv']);
    expect(reuseOf(planned)).toEqual({ doneEarlier: 0, reused: 19, followed: 0, settled: 0, newJobs: 2 });
    const second = await runIn(env, 'b.csv');
    console.log(`edited and extended: ${env.sim.stats().jobsCreated} jobs in all for 20 + 21 rows`);
    expect(second.code, exitAndOutput(second)).toBe(0);
    expect(env.sim.stats().jobsCreated).toBe(22);
    expect(second.stdout).toContain('21 succeeded, 0 failed of 21');
    expect(second.stdout).toContain('19 rows reuse videos another batch in this output root paid for');
    expect(second.stdout).toMatch(
      /jobs made: 2 for 21 rows \(2 kept, 19 rows reusing jobs other batches paid for\)/,
    );
    const batchB = batchOf(second)!;
    const manifestB = await manifestOf(second);
    const reused = manifestB.filter((r) => r.reusedFrom);
    expect(reused.map((r) => r.reusedFrom!.batchId)).toEqual(Array(19).fill(batchA));
    for (const r of reused) {
      // The earlier batch's video, now in this batch's folder too (beside its manifest: the default).
      expect(r.file).toBe(join(env.dir, 'out', batchB, `${r.rowId}.mp4`));
      expect((await stat(r.file!)).size).toBe(r.bytes);
    }
    expect(
      manifestB
        .filter((r) => !r.reusedFrom)
        .map((r) => r.rowId)
        .sort(),
    ).toEqual(['r21', 'r5']);

    // The same 21 rows in another order, under other ids: every request was paid for.
    await writeCsv(
      env,
      'c.csv',
      [...edited].reverse().map(([, p], i) => [`c${i + 1}`, p]),
    );
    const dry = await vidbatchIn(env, ['run', 'c.csv', '--dry-run']);
    expect(reuseOf(dry)).toEqual({ doneEarlier: 0, reused: 21, followed: 0, settled: 0, newJobs: 0 });
    const third = await runIn(env, 'c.csv');
    console.log(`reordered: ${env.sim.stats().jobsCreated} jobs in all`);
    expect(third.code, exitAndOutput(third)).toBe(0);
    expect(third.stdout).toContain('21 succeeded, 0 failed of 21');
    expect(env.sim.stats().jobsCreated).toBe(22);
  });

  it('a job a cancelled batch made is followed by another file with the same request, not paid again', async () => {
    env = await testEnv({ idempotency: false, jobSeconds: 4, jobJitterSeconds: 0 });
    await env.startWorker();
    const tag = randomUUID().slice(0, 8);
    const prompts = (await vbenchPrompts()).slice(30, 34).map((p) => `${p} (${tag})`);
    await writeCsv(
      env,
      'slow.csv',
      prompts.map((p, i) => [`s${i + 1}`, p]),
    );
    const started = background(['run', 'slow.csv', '--concurrency', '4', ...FAST_POLL_FLAGS], {
      cwd: env.dir,
      env: cliSettings(env),
    });
    const batchA = (
      await started.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/)
    )[1]!;
    await jobsMade(env, 4, started.output);
    expect((await vidbatchIn(env, ['cancel', batchA])).code).toBe(0);
    await started.done;
    await writeCsv(
      env,
      'again.csv',
      prompts.map((p, i) => [`a${i + 1}`, p]),
    );
    const planned = await vidbatchIn(env, ['plan', 'again.csv']);
    expect(reuseOf(planned)).toEqual({ doneEarlier: 0, reused: 0, followed: 4, settled: 0, newJobs: 0 });
    const again = await runIn(env, 'again.csv');
    console.log(`cancelled with 4 jobs, then another file: ${env.sim.stats().jobsCreated} jobs`);
    expect(again.code, exitAndOutput(again)).toBe(0);
    expect(again.stdout).toContain('4 succeeded, 0 failed of 4');
    expect(env.sim.stats().jobsCreated).toBe(4);
    const manifest = await manifestOf(again);
    expect(manifest.map((r) => r.reusedFrom?.batchId)).toEqual(Array(4).fill(batchA));
  });

  it('a file edited while its batch runs: the old batch is named, and the new one pays only for the change', async () => {
    env = await testEnv({ idempotency: false, jobSeconds: 4, jobJitterSeconds: 0 });
    await env.startWorker();
    const tag = randomUUID().slice(0, 8);
    const rows: [string, string][] = (await vbenchPrompts())
      .slice(40, 44)
      .map((p, i) => [`e${i + 1}`, `${p} (${tag})`]);
    await writeCsv(env, 'edit.csv', rows);
    const started = background(['run', 'edit.csv', '--concurrency', '4', ...FAST_POLL_FLAGS], {
      cwd: env.dir,
      env: cliSettings(env),
    });
    const old = (await started.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/))[1]!;
    await jobsMade(env, 4, started.output);
    rows[1] = ['e2', `${rows[1]![1]}, in the rain`];
    await writeCsv(env, 'edit.csv', rows);
    const edited = await runIn(env, 'edit.csv');
    console.log(`edited while running: ${env.sim.stats().jobsCreated} jobs for 4 + 4 rows`);
    expect(edited.code, exitAndOutput(edited)).toBe(0);
    expect(edited.stderr).toContain(`${old} was started from ${join(env.dir, 'edit.csv')} before it changed`);
    expect(edited.stderr).toContain(`vidbatch cancel ${old}`);
    expect(edited.stdout).toContain('4 succeeded, 0 failed of 4');
    expect(env.sim.stats().jobsCreated).toBe(5);
    await started.done;
  });

  it('claimed before paid: rows waiting on the rate budget while an edited copy runs in a second terminal', async () => {
    // A 2 requests/s gateway: the first batch's rows still wait for the budget when the second starts, so
    // neither has journalled the other's requests yet; only the claim taken before each POST keeps them apart.
    env = await testEnv({ idempotency: false, rateLimit: 2, jobSeconds: 1, jobJitterSeconds: 0 });
    await env.startWorker();
    const tag = randomUUID().slice(0, 8);
    const rows: [string, string][] = (await vbenchPrompts())
      .slice(60, 84)
      .map((p, i) => [`w${i + 1}`, `${p} (${tag})`]);
    await writeCsv(env, 'wait.csv', rows);
    const first = background(['run', 'wait.csv', '--concurrency', '50', ...FAST_POLL_FLAGS], {
      cwd: env.dir,
      env: cliSettings(env),
    });
    await jobsMade(env, 3, first.output);
    rows[1] = ['w2', `${rows[1]![1]}, in the rain`];
    await writeCsv(env, 'wait.csv', rows);
    const second = await runIn(env, 'wait.csv', '--concurrency', '50');
    const done = await first.done;
    const distinct = rows.length + 1;
    console.log(
      `two terminals on a 2 rps gateway: ${env.sim.stats().jobsCreated} jobs for ${distinct} distinct requests`,
    );
    expect(second.code, exitAndOutput(second)).toBe(0);
    expect(done.code, exitAndOutput(done)).toBe(0);
    expect(env.sim.stats().jobsCreated).toBe(distinct);
    const [older, newer] = await Promise.all([manifestOf(done), manifestOf(second)]);
    expect(newer.filter((r) => r.status === 'succeeded')).toHaveLength(rows.length);
    expect(older.filter((r) => r.status === 'succeeded')).toHaveLength(rows.length);
    // Each unchanged request was paid by whichever batch claimed it first; the other's row names that payment.
    const oldBy = new Map(older.map((r) => [r.rowId, r]));
    for (const row of newer.filter((r) => r.rowId !== 'w2')) {
      const other = oldBy.get(row.rowId)!;
      expect(row.jobId, row.rowId).toBe(other.jobId);
      expect([row.reusedFrom?.rowId, other.reusedFrom?.rowId].filter(Boolean), row.rowId).toEqual([
        row.rowId,
      ]);
    }
    // The edited row is a request of its own: paid by this batch.
    expect(newer.find((r) => r.rowId === 'w2')?.reusedFrom).toBeUndefined();
  });

  it('identical rows are separate takes; another file reuses them; --fresh pays again', async () => {
    env = await testEnv({ idempotency: false });
    await env.startWorker();
    const prompt = `a red kite over a wheat field (${randomUUID().slice(0, 8)})`;
    await writeCsv(env, 'three.csv', [
      ['t1', prompt],
      ['t2', prompt],
      ['t3', prompt],
    ]);
    const first = await runIn(env, 'three.csv', '--download', 'dl');
    expect(first.code, exitAndOutput(first)).toBe(0);
    expect(env.sim.stats().jobsCreated).toBe(3);
    expect(new Set((await manifestOf(first)).map((r) => r.jobId)).size).toBe(3);

    await writeCsv(env, 'more.csv', [
      ['x1', prompt],
      ['x2', `${prompt}, at night`],
      ['x3', prompt],
      ['x4', prompt],
    ]);
    const second = await runIn(env, 'more.csv', '--download', 'dl');
    expect(second.code, exitAndOutput(second)).toBe(0);
    console.log(`three takes, then a file with them: ${env.sim.stats().jobsCreated} jobs`);
    expect(env.sim.stats().jobsCreated).toBe(4);
    const byRow = new Map((await manifestOf(second)).map((r) => [r.rowId, r]));
    expect([byRow.get('x1'), byRow.get('x3'), byRow.get('x4')].map((r) => r?.reusedFrom?.rowId)).toEqual([
      't1',
      't2',
      't3',
    ]);

    await writeCsv(env, 'fresh.csv', [
      ['f1', prompt],
      ['f2', prompt],
    ]);
    const fresh = await vidbatchIn(env, [
      'run',
      'fresh.csv',
      '--fresh',
      '--download',
      'dl',
      ...FAST_POLL_FLAGS,
    ]);
    expect(fresh.code, exitAndOutput(fresh)).toBe(0);
    expect(env.sim.stats().jobsCreated).toBe(6);
    expect((await manifestOf(fresh)).filter((r) => r.reusedFrom)).toEqual([]);
  });
});
