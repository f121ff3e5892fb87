// Result URLs and error pages as hostile as the spec allows, from the command line: the real `vidbatch`
// (spawned) against this test's Temporal server, worker and simulator. A 2-hop redirect chain to every video
// (all downloaded and verified), and a proxy's 500 page on submits that prints the request's headers, key
// included (no 8 characters of the secret anywhere vidbatch writes or prints). The simulator's counters are
// printed so a run shows what it measured.
import { randomInt, randomUUID } from 'node:crypto';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readJsonl } from '../../src/results/jsonl';
import { finalStates, readManifest } from '../../src/results/manifest';
import { vidbatch, type CliRun } from './cli-helpers';
import { testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const FAST = ['--first-poll', '0.3', '--poll-interval', '0.2', '--poll-cap', '1', '--no-adaptive-poll'];

function cli(e: TestEnv): Record<string, string> {
  return {
    TEMPORAL_ADDRESS: e.address,
    VIDBATCH_TASK_QUEUE: e.taskQueue,
    GATEWAY_BASE_URL: e.sim.baseUrl,
    GATEWAY_API_KEY: e.sim.apiKey,
  };
}

function manifestOf(r: CliRun): string {
  const path = /Manifest: (\S+manifest\.jsonl)/.exec(r.stdout)?.[1];
  if (!path) throw new Error(`no manifest in output:\n${r.stdout}\n${r.stderr}`);
  return path;
}

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
  it('run --download follows a 2-hop 302 chain to every video, verified', async () => {
    env = await testEnv({ redirectResults: 2 });
    await env.startWorker();
    await csv(join(env.dir, 'r.csv'), 6);
    const r = await vidbatch(['run', 'r.csv', '--download', 'videos', ...FAST], {
      cwd: env.dir,
      env: cli(env),
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
    await env.startWorker();
    await csv(join(env.dir, 'e.csv'), 12);
    // The breaker off: a run of unknown outcomes must not pause the batch and leave this test waiting.
    const r = await vidbatch(['run', 'e.csv', '--pause-after-unknown', '0', ...FAST], {
      cwd: env.dir,
      env: cli(env),
    });
    const stats = env.sim.stats();
    console.log('header echo:', {
      exit: r.code,
      jobsCreated: stats.jobsCreated,
      headerEchoPages: stats.headerEchoPages,
      ambiguousSubmits: stats.ambiguousSubmits,
    });
    // A 500 on submit is an unknown outcome: resent once (default policy), then submit_unknown.
    expect([0, 3], r.stdout + r.stderr).toContain(r.code);
    expect(stats.headerEchoPages).toBeGreaterThan(0);
    const rows = finalStates(await readManifest(manifestOf(r)));
    console.log('rows failed submit_unknown:', rows.filter((x) => x.status === 'failed').length);
    expect(rows).toHaveLength(12);
    for (const row of rows) {
      if (row.status === 'failed') expect(row.errorCode).toBe('submit_unknown');
      else expect(row.status).toBe('succeeded');
    }
    expect(rows.reduce((n, row) => n + (row.unknownSubmits ?? 0), 0)).toBe(stats.headerEchoPages);
    expect(stats.jobsCreated).toBe(
      12 + stats.headerEchoPages - rows.filter((x) => x.status === 'failed').length,
    );

    // What a user looks at afterwards: status, results and its exports.
    const batchId = /(batch-[0-9a-f]{16})/.exec(r.stdout)![1]!;
    const status = await vidbatch(['status', batchId], { cwd: env.dir, env: cli(env) });
    const results = await vidbatch(['results', batchId], { cwd: env.dir, env: cli(env) });
    const jsonl = await vidbatch(['results', batchId, '--format', 'jsonl'], { cwd: env.dir, env: cli(env) });
    const journal = await readJsonl(join(manifestOf(r), '..', 'jobs.jsonl'));
    expect(journal.length).toBeGreaterThan(0);

    const { found, files } = await fragmentsInFiles(secret, env.dir);
    for (const [name, out] of Object.entries({ run: r, status, results, jsonl }))
      found.push(
        ...secretFragments(secret, out.stdout, `${name} stdout`),
        ...secretFragments(secret, out.stderr, `${name} stderr`),
      );
    console.log(`scanned ${files} files and 8 outputs for ${secret.length - 7} fragments of the secret`);
    expect(files).toBeGreaterThanOrEqual(4);
    expect(found).toEqual([]);
  });
});
