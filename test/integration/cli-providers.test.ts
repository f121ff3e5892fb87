// The spend-safety scenarios on every provider's dialect, through the real `vidbatch` (spawned), against the
// shared Temporal server, one worker per provider with that provider's settings, and the simulator speaking
// that dialect (same jobs, faults and counters for all). One table: PROVIDERS (rows) x SCENARIOS (columns);
// a new dialect is a new row (its name, its base URL on the simulator, a CSV it takes). Every figure comes from
// the simulator (its jobs, found by a tag unique to the scenario, and its counters) and the manifest; the
// table of figures is printed at the end. Then `vidbatch doctor` per provider, with a right and a wrong key.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadGatewaySettings } from '../../src/config';
import type { PromptResult } from '../../src/contract/prompt';
import { readJsonl } from '../../src/results/jsonl';
import { finalStates, readManifest } from '../../src/results/manifest';
import { isStoppedJob } from '../../src/simulator/counters';
import { DEFAULT_FAULTS } from '../../src/simulator/fault-settings';
import type { Job } from '../../src/simulator/jobs';
import { keysAtResults } from '../../src/simulator/openai-videos-routes';
import type { Simulator } from '../../src/simulator/server';
import { createWorker } from '../../src/worker';
import {
  background,
  exitAndOutput,
  FAST_POLL_FLAGS,
  manifestPathOf,
  vidbatch,
  type CliRun,
} from './cli-helpers';
import { testEnv, workflowBundle, type TestEnv } from './helpers';

interface ProviderCase {
  /** GATEWAY_PROVIDER. */
  name: string;
  /** The dialect's base URL on the simulator (at `origin`: the simulator's, or a proxy's in front of it). */
  baseUrl: (origin: string) => string;
  /** The CSV's header and its row `i`: values the provider takes. */
  header: string;
  line: (i: number, prompt: string) => string;
  /** The dialect has a cancel call: a job its row gave up on is stopped there (workflows/stop-job.ts). */
  canStop: boolean;
  /** A cancel of a running job only asks it to stop (fal): the row says `requested`, the ledger "abandoned". */
  runningStopRequested?: boolean;
}

const PROVIDERS: ProviderCase[] = [
  {
    name: 'model-gateway',
    baseUrl: (origin) => `${origin}/v1`,
    header: 'id,prompt',
    line: (i, prompt) => `r${i},${prompt}`,
    canStop: false,
  },
  {
    name: 'openai-videos',
    baseUrl: (origin) => `${origin}/openai/v1`,
    header: 'id,prompt,model,duration',
    line: (i, prompt) => `r${i},${prompt},sora-2,4`,
    canStop: true,
  },
  // fal and Replicate: the rows name no model, so each runs its default (fal's wan-25 takes 5 or 10 s).
  {
    name: 'fal',
    baseUrl: (origin) => `${origin}/fal`,
    header: 'id,prompt,duration',
    line: (i, prompt) => `r${i},${prompt},5`,
    canStop: true,
    runningStopRequested: true,
  },
  {
    name: 'replicate',
    baseUrl: (origin) => `${origin}/replicate/v1`,
    header: 'id,prompt,duration',
    line: (i, prompt) => `r${i},${prompt},5`,
    canStop: true,
  },
];

/** What a scenario measured, for the table printed at the end (and the docs). */
interface Figures {
  rows: number;
  jobs: number;
  kept: number;
  note?: string;
}
const TABLE: Record<string, Record<string, Figures>> = {};

afterAll(() => {
  const shown: Record<string, Record<string, string>> = {};
  for (const [provider, byScenario] of Object.entries(TABLE))
    shown[provider] = Object.fromEntries(
      Object.entries(byScenario).map(([scenario, f]) => [
        scenario,
        `${f.jobs} jobs / ${f.rows} rows, ${f.kept} kept${f.note ? ` (${f.note})` : ''}`,
      ]),
    );
  console.log('jobs made and videos kept, per provider and scenario:');
  console.table(shown);
});

/** One provider's simulator, worker and folder, shared by its scenarios. */
interface Shared {
  p: ProviderCase;
  e: TestEnv;
  sim: Simulator;
  /** The settings of `vidbatch` commands (its task queue, the dialect's base URL and key). */
  settings: Record<string, string>;
}

/** The scenario's rows: `n` lines of the provider's CSV, each prompt tagged `<tag> <i>`. */
async function csv(
  s: Shared,
  file: string,
  n: number,
  tag: string,
  edit?: (i: number) => string | undefined,
) {
  const prompt = (i: number) => edit?.(i) ?? `a calm lake at dawn ${tag} ${i}`;
  const lines = [s.p.header, ...Array.from({ length: n }, (_, k) => s.p.line(k + 1, prompt(k + 1)))];
  await writeFile(join(s.e.dir, file), lines.join('\n') + '\n');
}

/** The simulator's jobs for this scenario's rows (every dialect's jobs are the same jobs). */
const jobsOf = (sim: Simulator, tag: string): Job[] =>
  [...sim.state.jobs.values()].filter((j) => j.prompt.includes(` ${tag} `));

/** Jobs per row ("... <tag> 7" is r7). */
function jobsPerRow(sim: Simulator, tag: string): Record<string, number> {
  const perRow: Record<string, number> = {};
  for (const job of jobsOf(sim, tag)) {
    const row = `r${/ (\d+)$/.exec(job.prompt)?.[1]}`;
    perRow[row] = (perRow[row] ?? 0) + 1;
  }
  return perRow;
}

const completedOf = (sim: Simulator, tag: string) =>
  jobsOf(sim, tag).filter((j) => sim.state.jobStatus(j) === 'completed').length;

/** The scenario's jobs a cancel stopped at the simulator, by row ("... <tag> 7" is r7). */
const stoppedRows = (sim: Simulator, tag: string): string[] =>
  jobsOf(sim, tag)
    .filter(isStoppedJob)
    .map((j) => `r${/ (\d+)$/.exec(j.prompt)?.[1]}`)
    .sort();

/** Rows that ended succeeded with their video on disk. */
const kept = (rows: PromptResult[]) =>
  rows.filter((r) => r.status === 'succeeded' && r.file && existsSync(r.file)).length;

const run = (s: Shared, file: string, ...flags: string[]) =>
  vidbatch(['run', file, ...flags, ...FAST_POLL_FLAGS], { cwd: s.e.dir, env: s.settings });

const manifestOf = async (r: CliRun) => finalStates(await readManifest(manifestPathOf(r)));

async function until(what: string, check: () => boolean, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/**
 * A slow link in front of the simulator: the first answer of each path that carries a result (a video URL on
 * the simulator, or a `completed` status that points at the API's own content URL) reaches the worker `holdMs`
 * late, after that URL expired; everything else passes at once, redirects unfollowed. Returns its origin.
 */
async function slowResults(simOrigin: string, holdMs: number): Promise<{ origin: string; server: Server }> {
  const held = new Set<string>();
  const hopByHop = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive']);
  const server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers))
        if (typeof value === 'string' && !hopByHop.has(name)) headers[name] = value;
      const upstream = await fetch(`${simOrigin}${req.url}`, {
        method: req.method,
        headers,
        redirect: 'manual',
        ...(chunks.length ? { body: Buffer.concat(chunks) } : {}),
      });
      const body = Buffer.from(await upstream.arrayBuffer());
      const path = new URL(req.url ?? '/', simOrigin).pathname;
      const text = body.toString('utf8');
      const carries = text.includes('/files/') || /"status"\s*:\s*"completed"/.test(text);
      if (req.method === 'GET' && carries && !held.has(path)) {
        held.add(path);
        await sleep(holdMs);
      }
      const out: Record<string, string> = {};
      for (const name of ['content-type', 'retry-after', 'x-request-id', 'location']) {
        const value = upstream.headers.get(name);
        if (value) out[name] = value;
      }
      res.writeHead(upstream.status, out);
      res.end(body);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

interface Scenario {
  name: string;
  run: (s: Shared, tag: string) => Promise<Figures>;
}

const SCENARIOS: Scenario[] = [
  {
    name: 'lost submit answers, --on-unknown-submit fail',
    async run(s, tag) {
      const before = s.sim.stats();
      s.sim.setFaults({ scope: 'submit', drop: 0.2, error502After: 0.2 });
      await csv(s, 'lost-fail.csv', 10, tag);
      const r = await run(s, 'lost-fail.csv', '--concurrency', '4', '--on-unknown-submit', 'fail');
      const lost = s.sim.stats().ambiguousSubmitsTotal - before.ambiguousSubmitsTotal;
      const manifest = await manifestOf(r);
      const unknown = manifest.filter((row) => row.errorCode === 'submit_unknown');
      expect(lost).toBeGreaterThan(0);
      // One job per row, the lost ones included: none sent again.
      expect(jobsOf(s.sim, tag)).toHaveLength(10);
      expect(unknown.length).toBe(lost);
      for (const row of unknown) expect(row.unknownSubmits).toBe(1);
      expect(kept(manifest)).toBe(10 - unknown.length);
      expect(r.code, exitAndOutput(r)).toBe(3);
      return { rows: 10, jobs: 10, kept: kept(manifest), note: `${lost} answers lost` };
    },
  },
  {
    name: 'lost submit answers, resend (--max-unknown-resends 1)',
    async run(s, tag) {
      const before = s.sim.stats();
      s.sim.setFaults({ scope: 'submit', drop: 0.2, error502After: 0.1 });
      await csv(s, 'lost-resend.csv', 12, tag);
      const r = await run(s, 'lost-resend.csv', '--concurrency', '4', '--max-unknown-resends', '1');
      const lost = s.sim.stats().ambiguousSubmitsTotal - before.ambiguousSubmitsTotal;
      const manifest = await manifestOf(r);
      const perRow = jobsPerRow(s.sim, tag);
      const flagged = new Map(manifest.map((row) => [row.rowId, row.unknownSubmits ?? 0]));
      const jobs = jobsOf(s.sim, tag);
      expect(lost, exitAndOutput(r)).toBeGreaterThan(0);
      // Bounded: a row is sent at most 1 + N times, so jobs made <= rows x (1 + N).
      expect(jobs.length).toBeLessThanOrEqual(12 * 2);
      for (const [row, n] of Object.entries(perRow)) {
        expect(n, `${row}: ${n} jobs`).toBeLessThanOrEqual(2);
        // A row paid twice says so: each extra job follows an unknown outcome the row reports.
        expect(flagged.get(row), `${row}: ${n} jobs`).toBeGreaterThanOrEqual(n - 1);
      }
      // Every job whose id never reached vidbatch is reported on its row.
      for (const job of jobs.filter((j) => j.idDelivered === false)) {
        const row = `r${/ (\d+)$/.exec(job.prompt)?.[1]}`;
        expect(flagged.get(row), `${row}'s lost answer is not reported`).toBeGreaterThan(0);
      }
      const reported = manifest.reduce((n, row) => n + (row.unknownSubmits ?? 0), 0);
      expect(reported).toBe(lost);
      const failed = manifest.filter((row) => row.status === 'failed');
      expect(failed.every((row) => row.errorCode === 'submit_unknown')).toBe(true);
      expect(r.code, exitAndOutput(r)).toBe(failed.length > 0 ? 3 : 0);
      const rowsFlagged = manifest.filter((row) => (row.unknownSubmits ?? 0) > 0).length;
      expect(Number(/(\d+) rows? had a submit with an unknown outcome/.exec(r.stdout)?.[1] ?? 0)).toBe(
        rowsFlagged,
      );
      expect(kept(manifest)).toBe(12 - failed.length);
      return {
        rows: 12,
        jobs: jobs.length,
        kept: kept(manifest),
        note: `${lost} answers lost, ${rowsFlagged} rows flagged`,
      };
    },
  },
  {
    name: 'cancel mid-batch, run again',
    async run(s, tag) {
      // Jobs of 3 s: a spawned `vidbatch cancel` takes seconds on a busy machine, and must land mid-batch.
      s.sim.setOptions({ jobSeconds: 3, jobJitterSeconds: 0.3 });
      await csv(s, 'cancel.csv', 12, tag);
      const first = background(['run', 'cancel.csv', '--concurrency', '3', ...FAST_POLL_FLAGS], {
        cwd: s.e.dir,
        env: s.settings,
      });
      const batchId = (
        await first.waitFor(/(?:Started|Attached to) batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/)
      )[1]!;
      await until('3 jobs done', () => completedOf(s.sim, tag) >= 3);
      const cancel = await vidbatch(['cancel', batchId], { cwd: s.e.dir, env: s.settings });
      expect(cancel.code, exitAndOutput(cancel)).toBe(0);
      const cancelled = await first.done;
      expect(cancelled.code, exitAndOutput(cancelled)).toBe(3);
      expect(cancelled.stderr).toContain(`${batchId} was cancelled`);
      const jobsBefore = jobsOf(s.sim, tag).length;
      // Where the dialect can cancel, the jobs in flight were stopped there, and the ledger (and below, the
      // rows) say so.
      const stopped = stoppedRows(s.sim, tag);
      if (!s.p.canStop) expect(stopped).toEqual([]);
      const atCancel = finalStates(await readManifest(join(s.e.dir, 'out', batchId, 'manifest.jsonl')));
      const said = (stop: string) =>
        atCancel
          .filter((row) => row.jobStop === stop)
          .map((row) => row.rowId)
          .sort();
      // Stopped, or (fal, a running request) only asked to stop: the simulator's app stopped both.
      expect([...said('stopped'), ...said('requested')].sort()).toEqual(stopped);
      if (!s.p.runningStopRequested) expect(said('requested')).toEqual([]);
      const status = await vidbatch(['status', batchId], { cwd: s.e.dir, env: s.settings });
      const ledgerLine = status.stdout.split('\n').find((l) => l.startsWith('jobs made:')) ?? '';
      expect(ledgerLine, exitAndOutput(status)).toContain(`jobs made: ${jobsBefore} for 12 rows`);
      const saidStopped = said('stopped');
      if (saidStopped.length) expect(ledgerLine).toContain(`${saidStopped.length} stopped at the provider`);
      else expect(ledgerLine).not.toContain('stopped at the provider');

      const rerunAt = new Date().toISOString();
      const again = await run(s, 'cancel.csv', '--concurrency', '3');
      expect(again.code, exitAndOutput(again)).toBe(0);
      expect(again.stdout).toContain('12 succeeded, 0 failed of 12');
      const path = manifestPathOf(again);
      const manifest = finalStates(await readManifest(path));
      const lines = await readJsonl<PromptResult>(path);
      const before = finalStates(lines.filter((l) => l.finishedAt < rerunAt));
      const doneBefore = before.filter((row) => row.status === 'succeeded');
      const skipped = Number(/(\d+) rows? (?:was|were) skipped/.exec(again.stdout)?.[1] ?? 0);
      // Nothing paid twice: the re-run made jobs only for rows that had none, and for rows whose job the cancel
      // stopped (it made no video); every other job was checked and kept.
      expect(jobsOf(s.sim, tag)).toHaveLength(12 + stopped.length);
      const twice = Object.entries(jobsPerRow(s.sim, tag))
        .filter(([, n]) => n > 1)
        .map(([row]) => row)
        .sort();
      expect(twice).toEqual(stopped);
      expect(Object.values(jobsPerRow(s.sim, tag)).every((n) => n <= 2)).toBe(true);
      expect(doneBefore.length).toBeLessThan(12);
      expect(skipped).toBe(doneBefore.length);
      expect(kept(manifest)).toBe(12);
      return {
        rows: 12,
        jobs: 12 + stopped.length,
        kept: kept(manifest),
        note: `${jobsBefore} jobs and ${doneBefore.length} rows done at the cancel, ${stopped.length} stopped`,
      };
    },
  },
  {
    name: 'job deadline with no late videos kept (--late-for 0)',
    async run(s, tag) {
      // Jobs of a minute against a 2 s deadline: every row ends deadline_exceeded with its job running.
      s.sim.setOptions({ jobSeconds: 60, jobJitterSeconds: 0 });
      await csv(s, 'deadline.csv', 4, tag);
      const r = await run(s, 'deadline.csv', '--concurrency', '4', '--job-deadline', '2', '--late-for', '0');
      expect(r.code, exitAndOutput(r)).toBe(3);
      const manifest = await manifestOf(r);
      expect(manifest.map((row) => row.errorCode)).toEqual(Array(4).fill('deadline_exceeded'));
      expect(jobsOf(s.sim, tag)).toHaveLength(4);
      const stopped = stoppedRows(s.sim, tag);
      if (s.p.runningStopRequested) {
        // Queued jobs are removed; a running one is only asked to stop (its app may finish it and bill).
        expect(stopped).toEqual(['r1', 'r2', 'r3', 'r4']);
        for (const row of manifest) expect(['stopped', 'requested']).toContain(row.jobStop);
        const asked = manifest.filter((row) => row.jobStop === 'requested').length;
        if (asked) expect(r.stdout + r.stderr).toContain(`${asked} abandoned`);
      } else if (s.p.canStop) {
        // Each job stopped at the provider: it bills no more, and the ledger counts it so.
        expect(stopped).toEqual(['r1', 'r2', 'r3', 'r4']);
        for (const row of manifest) {
          expect(row.jobStop).toBe('stopped');
          expect(row.errorMessage).toContain('it was stopped at the provider');
        }
        expect(r.stdout + r.stderr).toContain('jobs made: 4 for 4 rows (0 kept, 4 stopped at the provider)');
      } else {
        // No way to stop it: each job runs on, and the ledger says it may still bill.
        expect(stopped).toEqual([]);
        for (const row of manifest) expect(row.jobStop).toBeUndefined();
        expect(r.stdout + r.stderr).toContain('4 abandoned); abandoned jobs may still finish and be billed');
      }
      return { rows: 4, jobs: 4, kept: 0, note: `${stopped.length} stopped at the provider` };
    },
  },
  {
    name: 'one row edited, run again',
    async run(s, tag) {
      await csv(s, 'edit.csv', 5, tag);
      const first = await run(s, 'edit.csv', '--concurrency', '5');
      expect(first.code, exitAndOutput(first)).toBe(0);
      expect(jobsOf(s.sim, tag)).toHaveLength(5);
      // The same file with row 3 changed: another batch, which pays only for the changed row.
      await csv(s, 'edit.csv', 5, tag, (i) => (i === 3 ? `a stormy sea ${tag} 3` : undefined));
      const again = await run(s, 'edit.csv', '--concurrency', '5');
      expect(again.code, exitAndOutput(again)).toBe(0);
      expect(manifestPathOf(again)).not.toBe(manifestPathOf(first));
      const manifest = await manifestOf(again);
      expect(jobsOf(s.sim, tag)).toHaveLength(6);
      expect(jobsPerRow(s.sim, tag)).toEqual({ r1: 1, r2: 1, r3: 2, r4: 1, r5: 1 });
      expect(kept(manifest)).toBe(5);
      return { rows: 5, jobs: 6, kept: kept(manifest), note: '5 jobs, then 1 for the edited row' };
    },
  },
  {
    name: 'result URL expired before its download',
    async run(s, tag) {
      // A worker of its own behind a slow link (its own task queue): the answer that carries a result comes
      // 3 s late, after the URL in it expired (2 s after it was signed).
      const { origin, server } = await slowResults(s.sim.origin, 3000);
      const taskQueue = `${s.e.taskQueue}-slow`;
      const settings = { ...s.settings, VIDBATCH_TASK_QUEUE: taskQueue };
      const gateway = loadGatewaySettings(settings);
      const connection = await NativeConnection.connect({ address: s.e.address });
      let worker: Worker | undefined;
      let running: Promise<void> | undefined;
      try {
        worker = await createWorker({
          connection,
          namespace: 'default',
          taskQueue,
          gateway: { ...gateway, baseUrl: s.p.baseUrl(origin), timeoutMs: 5000 },
          outRoot: join(s.e.dir, 'out'),
          workflowBundle: await workflowBundle(),
        });
        running = worker.run();
        const go = (file: string) =>
          vidbatch(['run', file, ...FAST_POLL_FLAGS], { cwd: s.e.dir, env: settings });
        s.sim.setOptions({ urlTtlSeconds: 2 });
        const ownContent = s.p.name === 'openai-videos';

        // The provider signs a fresh URL on a check: each row gets its video through one.
        s.sim.setOptions({ freshUrlOnCheck: true });
        const freshBefore = s.sim.stats().expiredUrlRequests;
        await csv(s, 'fresh.csv', 3, `${tag}f`);
        const fresh = await go('fresh.csv');
        expect(fresh.code, exitAndOutput(fresh)).toBe(0);
        const freshRows = await manifestOf(fresh);
        expect(kept(freshRows)).toBe(3);
        expect(jobsOf(s.sim, `${tag}f`)).toHaveLength(3);
        // An OpenAI-Videos gateway serves the video from its own API, signing the CDN URL on each request:
        // nothing expires for it. The others' first URL answered 403 once per row.
        const expiredFresh = s.sim.stats().expiredUrlRequests - freshBefore;
        expect(expiredFresh).toBe(ownContent ? 0 : 3);

        // It does not: the row ends url_expired with its job kept, and a re-run pays nothing.
        s.sim.setOptions({ freshUrlOnCheck: false });
        const staleBefore = s.sim.stats().expiredUrlRequests;
        await csv(s, 'stale.csv', 3, `${tag}s`);
        const stale = await go('stale.csv');
        const staleRows = await manifestOf(stale);
        if (ownContent) {
          expect(stale.code, exitAndOutput(stale)).toBe(0);
          expect(kept(staleRows)).toBe(3);
        } else {
          expect(stale.code, exitAndOutput(stale)).toBe(3);
          for (const row of staleRows) {
            expect(row).toMatchObject({ status: 'failed', errorCode: 'url_expired' });
            expect(row.jobId).toBeTruthy();
            expect(row.errorMessage).toContain('the job gave the same URL');
          }
          expect(s.sim.stats().expiredUrlRequests - staleBefore).toBe(3);
        }
        const again = await go('stale.csv');
        expect(again.code).toBe(stale.code);
        expect(jobsOf(s.sim, `${tag}s`)).toHaveLength(3);
        return {
          rows: 6,
          jobs: jobsOf(s.sim, `${tag}f`).length + jobsOf(s.sim, `${tag}s`).length,
          kept: kept(freshRows) + kept(staleRows),
          note: ownContent
            ? 'its /content URL signs afresh: none expired'
            : `3 through a fresh URL, 3 url_expired with their job`,
        };
      } finally {
        if (worker?.getState() === 'RUNNING') worker.shutdown();
        await running?.catch(() => undefined);
        await connection.close();
        server.close();
      }
    },
  },
  {
    name: 'video behind a 302 to a CDN',
    async run(s, tag) {
      const before = s.sim.stats();
      const keysBefore = keysAtResults(s.sim.state);
      s.sim.setOptions({ redirectResults: 2 });
      await csv(s, 'cdn.csv', 6, tag);
      const r = await run(s, 'cdn.csv', '--concurrency', '3');
      const after = s.sim.stats();
      expect(r.code, exitAndOutput(r)).toBe(0);
      const manifest = await manifestOf(r);
      expect(kept(manifest)).toBe(6);
      expect(jobsOf(s.sim, tag)).toHaveLength(6);
      expect(after.videosServed - before.videosServed).toBe(6);
      expect(after.redirectsServed - before.redirectsServed).toBeGreaterThanOrEqual(12);
      // The key reached no result host, and is in no output.
      expect(keysAtResults(s.sim.state) - keysBefore).toBe(0);
      expect(r.stdout + r.stderr).not.toContain(s.sim.apiKey);
      return { rows: 6, jobs: 6, kept: kept(manifest), note: '2 redirects each, no key at the CDN' };
    },
  },
];

describe.each(PROVIDERS)('GATEWAY_PROVIDER=$name', (p) => {
  let s: Shared;
  beforeAll(async () => {
    const e = await testEnv({ jobSeconds: 0.5, jobJitterSeconds: 0.2, seed: 11 });
    const settings = {
      TEMPORAL_ADDRESS: e.address,
      VIDBATCH_TASK_QUEUE: e.taskQueue,
      GATEWAY_PROVIDER: p.name,
      GATEWAY_BASE_URL: p.baseUrl(e.sim.origin),
      GATEWAY_API_KEY: e.sim.apiKey,
    };
    await e.startWorker({ ...loadGatewaySettings(settings), timeoutMs: 2000 });
    s = { p, e, sim: e.sim, settings };
  });
  afterAll(async () => {
    await s?.e.close();
  });
  beforeEach(() => {
    // Each scenario starts from a well-behaved gateway with short jobs.
    s.sim.setFaults(DEFAULT_FAULTS);
    s.sim.setOptions({
      jobSeconds: 0.5,
      jobJitterSeconds: 0.2,
      urlTtlSeconds: 0,
      freshUrlOnCheck: false,
      redirectResults: 0,
    });
  });

  it.each(SCENARIOS)(
    'npx vidbatch run, $name: no request paid twice, every video kept that can be',
    async (scenario) => {
      const figures = await scenario.run(s, randomUUID().slice(0, 8));
      (TABLE[p.name] ??= {})[scenario.name] = figures;
      console.log(`${p.name} / ${scenario.name}: ${JSON.stringify(figures)}`);
    },
  );

  it('npx vidbatch doctor checks the key where the provider has a call for it, naming the provider', async () => {
    const doctor = (key: string) =>
      vidbatch(['doctor'], { cwd: s.e.dir, env: { ...s.settings, GATEWAY_API_KEY: key } });
    const [right, wrong] = await Promise.all([doctor(s.sim.apiKey), doctor('sk-not-a-key')]);
    const keyLine = (r: CliRun) => r.stdout.split('\n').find((l) => /gateway key:/.test(l)) ?? '';
    console.log(`${p.name} doctor: right key: ${keyLine(right)}\n  wrong key: ${keyLine(wrong)}`);
    expect(right.code, exitAndOutput(right)).toBe(0);
    expect(keyLine(right)).toMatch(new RegExp(`^ok +gateway key: ${p.name}`));
    expect(wrong.stdout + wrong.stderr).not.toContain('sk-not-a-key');
    if (p.name === 'fal') {
      // fal's queue has no call that checks a key without making a job: doctor says so, and cannot fail it.
      expect(keyLine(right)).toContain('checked only by the first submit');
      expect(wrong.code, exitAndOutput(wrong)).toBe(0);
      expect(keyLine(wrong)).toBe(keyLine(right));
    } else {
      expect(keyLine(right)).toMatch(/accepts it: GET \S+ answered/);
      expect(wrong.code, exitAndOutput(wrong)).toBe(2);
      expect(keyLine(wrong)).toMatch(
        new RegExp(`^FAIL gateway key: 401: ${p.name} does not accept GATEWAY_API_KEY`),
      );
    }
  });
});
