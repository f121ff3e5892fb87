// Result URLs and error pages as hostile as the spec allows, from the command line: the real `vidbatch`
// (spawned) against this test's Temporal server, worker and simulator. A 2-hop redirect chain to every video
// (all downloaded, by default, and verified), and a proxy's 500 page on submits that prints the request's
// headers, key included (no 8 characters of the secret anywhere vidbatch writes or prints). The simulator's
// counters are printed so a run shows what it measured.
import { randomInt, randomUUID } from 'node:crypto';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Runtime, type LogLevel, type LogMetadata } from '@temporalio/worker';
import { afterEach, describe, expect, it } from 'vitest';
import { readJsonl } from '../../src/results/jsonl';
import { readManifest } from '../../src/results/manifest';
import { vidbatch, type CliRun, manifestPathOf } from './cli-helpers';
import { testEnv, type TestEnv, cliSettings } from './helpers';

let env: TestEnv | undefined;
let stopCapture: (() => void) | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
  stopCapture?.();
  stopCapture = undefined;
});

/** Keeps every log line of this process's workers (the in-process worker's activities log here). */
function captureWorkerLogs(): string[] {
  const logger = Runtime.instance().logger;
  const log = logger.log.bind(logger);
  const lines: string[] = [];
  logger.log = (level: LogLevel, message: string, meta?: LogMetadata) => {
    lines.push(JSON.stringify({ level, message, meta }));
    log(level, message, meta);
  };
  stopCapture = () => {
    logger.log = log;
  };
  return lines;
}

const FAST = ['--first-poll', '0.3', '--poll-interval', '0.2', '--poll-cap', '1', '--no-adaptive-poll'];

const manifestOf = manifestPathOf;

/** `n` rows, each prompt tagged so this test's batch id is its own. */
async function csv(path: string, n: number): Promise<void> {
  const tag = randomUUID().slice(0, 8);
  const rows = Array.from(
    { length: n },
    (_, i) => `r${i + 1},a lighthouse in a storm ${i + 1} ${tag},720P,5`,
  );
  await writeFile(path, ['id,prompt,resolution,duration', ...rows].join('\n') + '\n');
}

/** A key whose secret is letters only, so 8 of them in a row cannot turn up by chance in ids or hashes. */
function letterKey(length = 40): string {
  const letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
  return `sk-${Array.from({ length }, () => letters[randomInt(letters.length)]).join('')}`;
}

/**
 * Every `window`-character run of `secret` found in `text`, as `[fragment, where]`. A cut that keeps part of
 * a key defeats any check for the whole key: so an 8-character window slides over the secret.
 */
export function secretFragments(secret: string, text: string | Buffer, where: string, window = 8) {
  const found: [string, string][] = [];
  for (let i = 0; i + window <= secret.length; i++) {
    const fragment = secret.slice(i, i + window);
    if (text.includes(fragment)) found.push([fragment, where]);
  }
  return found;
}

/** The fragments in every file under `dir` (recursively), read as bytes. */
async function fragmentsInFiles(secret: string, dir: string) {
  const found: [string, string][] = [];
  let files = 0;
  for (const entry of await readdir(dir, { recursive: true })) {
    const path = join(dir, entry);
    if (!(await stat(path)).isFile()) continue;
    files += 1;
    found.push(...secretFragments(secret, await readFile(path), path));
  }
  return { found, files };
}

describe('hostile result URLs and error pages from the command line', () => {
  it('run follows a 2-hop 302 chain to every video, kept beside the manifest by default, verified', async () => {
    env = await testEnv({ redirectResults: 2 });
    await env.startWorker();
    await csv(join(env.dir, 'r.csv'), 6);
    const r = await vidbatch(['run', 'r.csv', ...FAST], {
      cwd: env.dir,
      env: cliSettings(env),
    });
    const stats = env.sim.stats();
    console.log('redirects:', {
      jobsCreated: stats.jobsCreated,
      redirectsServed: stats.redirectsServed,
      videosServed: stats.videosServed,
    });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('6 succeeded, 0 failed of 6');
    const rows = await readManifest(manifestOf(r));
    expect(rows).toHaveLength(6);
    for (const row of rows) {
      expect(row.status).toBe('succeeded');
      expect(row.file).toBe(join(dirname(manifestOf(r)), `${row.rowId}.mp4`));
      expect(row.downloadError).toBeUndefined();
      expect(row.verification).toMatchObject({ ok: true, height: 720, problems: [] });
      expect((await stat(row.file!)).size).toBeGreaterThan(0);
    }
    // Every video came through both hops, and nothing was paid twice.
    expect(stats.jobsCreated).toBe(6);
    expect(stats.videosServed).toBeGreaterThanOrEqual(6);
    expect(stats.redirectsServed).toBe(2 * stats.videosServed);
  });

  it('a 500 page echoing the request headers on submits leaves no 8 characters of the secret anywhere', async () => {
    const key = letterKey();
    const secret = key.slice('sk-'.length);
    env = await testEnv({ apiKeys: [key], seed: 7, faults: { echoHeaders500: 0.3, scope: 'submit' } });
    const e = env;
    const workerLogs = captureWorkerLogs();
    await e.startWorker();
    const outputs: Record<string, CliRun> = {};

    /** Runs 12 rows with these flags; checks the rows against the simulator's counters. */
    const batch = async (name: string, flags: string[]) => {
      const before = e.sim.stats();
      await csv(join(e.dir, `${name}.csv`), 12);
      // The breaker off: a run of unknown outcomes must not pause the batch and leave this test waiting.
      const r = await vidbatch(['run', `${name}.csv`, '--pause-after-unknown', '0', ...flags, ...FAST], {
        cwd: e.dir,
        env: cliSettings(e),
      });
      const after = e.sim.stats();
      const pages = after.headerEchoPages - before.headerEchoPages;
      const jobs = after.jobsCreated - before.jobsCreated;
      const rows = await readManifest(manifestOf(r));
      const failed = rows.filter((x) => x.status === 'failed').length;
      console.log(`header echo, ${name}:`, {
        exit: r.code,
        jobsCreated: jobs,
        headerEchoPages: pages,
        failed,
      });
      // A 500 on submit is an unknown outcome: the row is resent or fails with submit_unknown, per policy.
      expect(r.code, r.stdout + r.stderr).toBe(failed ? 3 : 0);
      expect(pages).toBeGreaterThan(0);
      expect(rows).toHaveLength(12);
      for (const row of rows) {
        if (row.status === 'failed') expect(row.errorCode).toBe('submit_unknown');
        else expect(row.status).toBe('succeeded');
      }
      expect(rows.reduce((n, row) => n + (row.unknownSubmits ?? 0), 0)).toBe(pages);
      // Each 500 came after the job was made: one job per POST.
      expect(jobs).toBe(12 + pages - failed);
      const batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(r.stdout)![1]!;
      // What a user looks at afterwards: status, results and its exports.
      outputs[`${name} run`] = r;
      outputs[`${name} status`] = await vidbatch(['status', batchId], { cwd: e.dir, env: cliSettings(e) });
      outputs[`${name} results`] = await vidbatch(['results', batchId], { cwd: e.dir, env: cliSettings(e) });
      outputs[`${name} results jsonl`] = await vidbatch(['results', batchId, '--format', 'jsonl'], {
        cwd: e.dir,
        env: cliSettings(e),
      });
      expect((await readJsonl(join(manifestOf(r), '..', 'jobs.jsonl'))).length).toBeGreaterThan(0);
      return { pages, failed };
    };
    // `fail` first: every row a page hit fails at once with the page's text as its error, so the leak a cut
    // before redaction makes always reaches the manifest, however resends are timed. Its 12 submits take a
    // fixed stretch of the seeded dice, so the next batch's first 12 do too: both get pages.
    const fail = await batch('fail', ['--on-unknown-submit', 'fail']);
    expect(fail.failed).toBe(fail.pages);
    // The default policy: resent once, then submit_unknown.
    await batch('resend', []);

    const { found, files } = await fragmentsInFiles(secret, env.dir);
    for (const [name, out] of Object.entries(outputs))
      found.push(
        ...secretFragments(secret, out.stdout, `${name} stdout`),
        ...secretFragments(secret, out.stderr, `${name} stderr`),
      );
    // The worker's own log, where each unknown outcome is logged with the gateway's text.
    expect(workerLogs.filter((l) => l.includes('submit outcome unknown')).length).toBeGreaterThan(0);
    found.push(...secretFragments(secret, workerLogs.join('\n'), 'worker log'));
    const scanned = Object.keys(outputs).length * 2 + 1;
    console.log(
      `scanned ${files} files and ${scanned} outputs for ${secret.length - 7} fragments of the secret`,
    );
    expect(files).toBeGreaterThanOrEqual(8);
    expect(found).toEqual([]);
  });
});
