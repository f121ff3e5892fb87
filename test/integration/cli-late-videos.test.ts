// Late videos, from the command line: jobs that take longer than `--job-deadline` end their rows on time, and
// each video that arrives afterwards is downloaded, verified and recorded as the row's new state. The real
// `vidbatch` (spawned) against this test's Temporal server, worker and simulator (which ignores
// Idempotency-Key, so only vidbatch's own records stop a second payment: its job counter is the bill); then the
// embedded server, which stops with `run`, where `vidbatch download` fetches what arrived.
import { createHash, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { PromptResult } from '../../src/contract/prompt';
import { readJsonl } from '../../src/results/jsonl';
import { readManifest } from '../../src/results/manifest';
import { startSimulator, type Simulator } from '../../src/simulator/server';
import {
  background,
  exitAndOutput,
  FAST_POLL_FLAGS,
  manifestPathOf,
  runIn,
  vidbatch,
  vidbatchIn,
} from './cli-helpers';
import { cliSettings, testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  await env?.close();
  env = undefined;
});

const sha256 = async (file: string) =>
  createHash('sha256')
    .update(await readFile(file))
    .digest('hex');

const batchOf = (text: string) => /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(text)?.[1];

async function writeRows(dir: string, name: string, rows: [id: string, prompt: string][]): Promise<void> {
  await writeFile(join(dir, name), ['id,prompt', ...rows.map(([id, p]) => `${id},${p}`)].join('\n') + '\n');
}

/** A Slack-style receiver (`--notify slack+<url>`): the texts it was sent. */
async function slackReceiver() {
  const texts: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      texts.push((JSON.parse(body) as { text: string }).text);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `slack+http://127.0.0.1:${(server.address() as AddressInfo).port}/slack`,
    texts,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Waits until every row of the manifest is a late video (two minutes at most). */
async function lateVideos(manifest: string, rows: number, output = ''): Promise<PromptResult[]> {
  for (let i = 0; ; i++) {
    const final = await readManifest(manifest);
    if (final.length === rows && final.every((r) => r.arrivedLate && r.status === 'succeeded')) return final;
    if (i > 1200) throw new Error(`no late videos:\n${JSON.stringify(final, null, 1)}\n${output}`);
    await sleep(100);
  }
}

/** Each late video: on disk as recorded, verified, and marked with how and when its row had ended. */
async function expectKept(final: PromptResult[], ended: PromptResult[], endedAs: string): Promise<void> {
  for (const row of final) {
    const before = ended.find((r) => r.rowId === row.rowId)!;
    expect(row.arrivedLate, row.rowId).toEqual({ endedAs, endedAt: before.finishedAt });
    expect(row.jobId).toBe(before.jobId);
    expect(row.verification).toMatchObject({ ok: true });
    expect(await sha256(row.file!)).toBe(row.sha256);
    expect(Date.parse(row.finishedAt)).toBeGreaterThan(Date.parse(before.finishedAt));
  }
}

describe('late videos (spawned vidbatch, a worker that keeps running)', () => {
  it('rows end on their deadline; each video arrives late, is kept and counted; no re-run pays again', async () => {
    // Every job takes 6 s, three times the job deadline.
    env = await testEnv({ jobSeconds: 6, jobJitterSeconds: 0.3, idempotency: false });
    await env.startWorker();
    const tag = randomUUID().slice(0, 8);
    const rows: [string, string][] = [1, 2, 3].map((i) => [`r${i}`, `a slow tide ${i} ${tag}`]);
    await writeRows(env.dir, 'late.csv', rows);
    const slack = await slackReceiver();
    cleanups.push(slack.close);
    const run = await runIn(
      env,
      'late.csv',
      '--job-deadline',
      '2',
      '--late-for',
      '5m',
      '--late-check',
      '1',
      '--notify',
      slack.url,
    );
    expect(run.code, exitAndOutput(run)).toBe(3);
    expect(run.stdout).toContain('0 succeeded, 3 failed of 3');
    expect(run.stdout).toContain(
      '3 jobs passed their deadline or were cancelled and may still finish (and be billed): the workers check them for 5 min after their rows ended',
    );
    const batchId = batchOf(run.stdout)!;
    const manifest = manifestPathOf(run);

    // On time: each row ended deadline_exceeded well before its job could finish.
    const ended = await readManifest(manifest);
    expect(ended.map((r) => r.errorCode)).toEqual(Array(3).fill('deadline_exceeded'));
    for (const r of ended) {
      expect(r.jobId).toBeDefined();
      expect(Date.parse(r.finishedAt) - Date.parse(r.submittedAt!), r.rowId).toBeLessThan(5500);
    }

    const final = await lateVideos(manifest, 3);
    await expectKept(final, ended, 'deadline_exceeded');
    // The row's latest line is the late one, after its ended line.
    const lines = await readJsonl<PromptResult>(manifest);
    for (const r of rows) expect(lines.filter((l) => l.rowId === r[0]).at(-1)?.arrivedLate).toBeDefined();
    expect(env.sim.stats().jobsCreated).toBe(3);
    // Told: the batch's end, then each late video once, naming its row and job.
    for (let i = 0; slack.texts.length < 4 && i < 300; i++) await sleep(100);
    expect(slack.texts.filter((t) => t.startsWith('*vidbatch: batch completed*'))).toHaveLength(1);
    const told = slack.texts.filter((t) => t.startsWith('*vidbatch: batch late video*'));
    expect(told).toHaveLength(3);
    for (const r of final)
      expect(
        told.filter((t) => t.includes(`why: row ${r.rowId}: the video of job ${r.jobId} arrived`)),
      ).toHaveLength(1);

    const status = await vidbatchIn(env, ['status', 'late.csv']);
    expect(status.code, exitAndOutput(status)).toBe(0);
    expect(status.stdout).toContain(`${batchId}: COMPLETED`);
    expect(status.stdout).toContain('manifest (final state per row): 3 succeeded, 0 failed of 3');
    expect(status.stdout).toContain('3 videos arrived late, after their rows ended');
    expect(status.stdout).toContain('jobs made: 3 for 3 rows (3 kept (arrived late: 3))');

    const results = await vidbatchIn(env, ['results', 'late.csv']);
    expect(results.code, exitAndOutput(results)).toBe(0);
    expect(results.stdout).toContain('3 succeeded, 0 failed');
    expect(results.stdout).toContain('jobs made: 3 for 3 rows (3 kept (arrived late: 3))');
    const succeeded = await readFile(join(env.dir, 'out', batchId, 'succeeded.csv'), 'utf8');
    expect(succeeded.split('\n')[0]).toMatch(/,arrivedLate$/);
    expect(succeeded).toContain('deadline_exceeded at ');

    // A re-run of the file, a retry of its failed rows, and the same requests in another file make no job.
    const again = await runIn(env, 'late.csv', '--job-deadline', '2');
    expect(again.stderr, exitAndOutput(again)).toContain(`Attached to batch ${batchId}`);
    const retried = await vidbatchIn(env, ['retry-failed', 'late.csv']);
    expect(retried.stdout, exitAndOutput(retried)).toContain(`${batchId}: no failed rows; nothing to retry`);
    await writeRows(
      env.dir,
      'other.csv',
      [...rows].reverse().map(([id, p]) => [`x-${id}`, p]),
    );
    const other = await runIn(env, 'other.csv');
    expect(other.code, exitAndOutput(other)).toBe(0);
    expect(other.stdout).toContain('3 rows reuse videos another batch in this output root paid for');
    expect(env.sim.stats().jobsCreated).toBe(3);
  }, 240_000);

  it("a cancelled row's video arrives late too; the cancelled batch's re-run pays nothing", async () => {
    env = await testEnv({ jobSeconds: 8, jobJitterSeconds: 0.3, idempotency: false });
    await env.startWorker();
    const tag = randomUUID().slice(0, 8);
    await writeRows(env.dir, 'c.csv', [
      ['c1', `a kite at dusk ${tag}`],
      ['c2', `a kite at dawn ${tag}`],
    ]);
    const settings = cliSettings(env);
    const p = background(['run', 'c.csv', '--late-check', '1', ...FAST_POLL_FLAGS], {
      cwd: env.dir,
      env: settings,
    });
    cleanups.push(() => p.stop());
    for (let i = 0; env.sim.stats().jobsCreated < 2; i++) {
      if (i > 600) throw new Error(`no jobs made:\n${p.output()}`);
      await sleep(100);
    }
    await sleep(500); // the prompts poll now
    const cancel = await vidbatchIn(env, ['cancel', 'c.csv']);
    expect(cancel.code, exitAndOutput(cancel)).toBe(0);
    const cancelled = await p.done;
    expect(cancelled.code, exitAndOutput(cancelled)).toBe(3);
    const batchId = batchOf(cancelled.stderr)!;
    const manifest = join(env.dir, 'out', batchId, 'manifest.jsonl');
    const ended = await readManifest(manifest);
    expect(ended.map((r) => [r.errorCode, !!r.jobId])).toEqual([
      ['cancelled', true],
      ['cancelled', true],
    ]);

    const final = await lateVideos(manifest, 2, cancelled.stderr);
    await expectKept(final, ended, 'cancelled');
    expect(env.sim.stats().jobsCreated).toBe(2);

    // A cancelled batch runs again: its rows are succeeded now, so none is sent.
    const rerun = await runIn(env, 'c.csv');
    expect(rerun.code, exitAndOutput(rerun)).toBe(0);
    expect(rerun.stdout).toContain('2 succeeded, 0 failed of 2');
    expect(rerun.stdout).toContain('2 rows were skipped');
    expect(env.sim.stats().jobsCreated).toBe(2);
  }, 240_000);
});

describe('late videos on the embedded server (stops with run)', () => {
  it('run says how late jobs will be fetched; download fetches what arrived, and so does the next run here', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-late-'));
    const sim: Simulator = await startSimulator({ jobSeconds: 8, jobJitterSeconds: 0.3 });
    cleanups.push(() => sim.close());
    const gateway = { GATEWAY_BASE_URL: sim.baseUrl, GATEWAY_API_KEY: sim.apiKey };
    await writeRows(dir, 'e.csv', [
      ['e1', 'a glacier calving'],
      ['e2', 'a glacier at night'],
    ]);
    const run = await vidbatch(['run', 'e.csv', '--job-deadline', '2', ...FAST_POLL_FLAGS], {
      cwd: dir,
      env: gateway,
    });
    expect(run.code, exitAndOutput(run)).toBe(3);
    const batchId = batchOf(run.stdout)!;
    expect(run.stdout).toContain(
      '2 jobs passed their deadline or were cancelled and may still finish (and be billed): vidbatch checks them for 24 h after their rows ended while a worker runs here',
    );
    expect(run.stdout).toContain(`meanwhile \`vidbatch download ${batchId}\` fetches what arrived`);
    const manifest = manifestPathOf(run);
    const ended = await readManifest(manifest);
    expect(ended.map((r) => r.errorCode)).toEqual(['deadline_exceeded', 'deadline_exceeded']);

    // Nothing runs now. Once the jobs are done at the gateway, download asks them and keeps what arrived.
    const done = Math.max(...ended.map((r) => Date.parse(r.submittedAt!))) + 9_000;
    await sleep(Math.max(0, done - Date.now()));
    const download = await vidbatch(['download', 'e.csv'], { cwd: dir, env: gateway });
    expect(download.code, exitAndOutput(download)).toBe(0);
    expect(download.stdout).toContain('2 videos on disk, verified: 0 already there, 2 fetched');
    expect(download.stdout).toContain(
      'late videos (rows that ended deadline_exceeded or cancelled with a job): 2 arrived and kept',
    );
    await expectKept(await readManifest(manifest), ended, 'deadline_exceeded');

    const status = await vidbatch(['status', 'e.csv'], { cwd: dir });
    expect(status.code, exitAndOutput(status)).toBe(0);
    expect(status.stdout).toContain('2 videos arrived late');
    expect(status.stdout).toContain('jobs made: 2 for 2 rows (2 kept (arrived late: 2))');
    // Their prompts stopped checking: no worker fetches those videos again.
    expect(status.stdout).not.toMatch(/prompt workflows:.*late/);
    expect(sim.stats().jobsCreated).toBe(2);

    // Another late row, then the next run in this folder (another file): its worker makes the late checks
    // that came due while nothing ran, and keeps the video.
    await writeRows(dir, 'g.csv', [['g1', 'a heron waiting']]);
    const slow = await vidbatch(
      ['run', 'g.csv', '--job-deadline', '2', '--late-check', '1', ...FAST_POLL_FLAGS],
      { cwd: dir, env: gateway },
    );
    expect(slow.code, exitAndOutput(slow)).toBe(3);
    const gManifest = manifestPathOf(slow);
    const gEnded = await readManifest(gManifest);
    await sleep(Math.max(0, Date.parse(gEnded[0]!.submittedAt!) + 9_000 - Date.now()));
    expect((await readManifest(gManifest))[0]!.arrivedLate).toBeUndefined();
    await writeRows(dir, 'h.csv', [['h1', 'a heron taking off']]);
    const next = await vidbatch(['run', 'h.csv', ...FAST_POLL_FLAGS], { cwd: dir, env: gateway });
    expect(next.code, exitAndOutput(next)).toBe(0);
    await expectKept(await lateVideos(gManifest, 1), gEnded, 'deadline_exceeded');
    expect(sim.stats().jobsCreated).toBe(4);
  }, 300_000);
});
