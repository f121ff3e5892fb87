// Machines that share nothing but the Temporal cluster, an object store and the gateway key: the self-hosted
// server on PostgreSQL (scripts/cluster.sh), a real S3-compatible server (versitygw), two `vidbatch worker`s
// each in its own folder with its own out root, a starter in a third, all with one VIDBATCH_STORE, and a
// hostile simulator. During the batch one worker is SIGKILLed and the object server restarted. Runs when
// VIDBATCH_CLUSTER_ADDRESS names the cluster (see cluster.test.ts), and needs versitygw (test/s3-server.ts).
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeVbenchCsv } from '../../bench/vbench';
import { readManifest } from '../../src/results/manifest';
import { S3Store } from '../../src/store/s3-store';
import { vidbatch } from '../integration/cli-helpers';
import { requireVersitygw, startS3Server } from '../s3-server';
import { hostileFlags, requireCluster, simulatorProcess, workerStarter } from './helpers';

const ADDRESS = requireCluster();
const ROWS = 200;

const versitygw = ADDRESS ? requireVersitygw() : undefined;

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

describe.runIf(ADDRESS && versitygw)('the cluster with an object store and nothing else shared', () => {
  it('finishes every row once, every video in the bucket, through a worker SIGKILL and a store restart', async () => {
    const s3 = await startS3Server(versitygw!, 'vidbatch-cluster');
    cleanups.push(() => s3.stop());
    const base = await mkdtemp(join(tmpdir(), 'vidbatch-cluster-store-'));
    const folders = [join(base, 'machine-1'), join(base, 'machine-2'), join(base, 'starter')];
    for (const dir of folders) await mkdir(dir);
    const store = `s3://${s3.bucket}/shared`;
    // A queue of its own: the other cluster tests' workers (which have no store) must not take its tasks.
    const shared = {
      TEMPORAL_ADDRESS: ADDRESS!,
      VIDBATCH_TASK_QUEUE: `store-${Date.now().toString(36)}`,
      VIDBATCH_STORE: store,
      ...s3.env,
    };

    const { baseUrl, apiKey, stats, until, recovery } = await simulatorProcess(
      hostileFlags(29),
      base,
      cleanups,
    );

    const startWorker = workerStarter(
      { ...shared, GATEWAY_BASE_URL: baseUrl, GATEWAY_API_KEY: apiKey },
      cleanups,
    );
    const workers = [await startWorker(folders[0]!), await startWorker(folders[1]!)];

    // Row ids unique to this run: the batch id is the content's hash, and the cluster outlives test runs.
    await writeVbenchCsv(join(folders[2]!, 'prompts.csv'), ROWS, 'all_dimension', Date.now() % 1_000_000_000);
    const poll = ['--first-poll', '3', '--poll-interval', '1', '--no-adaptive-poll'];
    const run = await vidbatch(['run', 'prompts.csv', '--detach', '--concurrency', '40', ...poll], {
      cwd: folders[2]!,
      env: shared,
    });
    expect(run.code, run.stderr).toBe(0);
    const batch = /Started batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(run.stderr)![1]!;

    const recovered: Record<string, number> = {};
    await until(40);
    workers[0]!.child.kill('SIGKILL');
    await workers[0]!.done;
    workers[0] = await startWorker(folders[0]!);
    recovered['worker SIGKILL'] = await recovery();
    await until(110);
    await s3.restart(5_000);
    recovered['object server restart (5 s down)'] = await recovery();

    const watched = await vidbatch(['watch', batch], { cwd: folders[2]!, env: shared });
    expect([0, 3], watched.stdout + watched.stderr).toContain(watched.code); // 3: rows failed (checked below)

    // Every row once in the folded results, each a success or an unknown submit it reports.
    Object.assign(process.env, s3.env, { VIDBATCH_STORE: store });
    const rows = await readManifest(`${store}/${batch}/manifest.jsonl`);
    expect(new Set(rows.map((r) => r.rowId)).size).toBe(ROWS);
    expect(rows).toHaveLength(ROWS);
    const failed = rows.filter((r) => r.status !== 'succeeded');
    expect(failed.filter((r) => r.errorCode !== 'submit_unknown')).toEqual([]);
    // Every video in the bucket; none left in either worker's folders.
    const succeeded = rows.filter((r) => r.status === 'succeeded');
    expect(succeeded.filter((r) => !r.file?.startsWith(`${store}/${batch}/`))).toEqual([]);
    const objects = new S3Store(store);
    cleanups.push(() => Promise.resolve(objects.destroy()));
    const keys: { key: string; size: number }[] = [];
    for await (const o of objects.list(`${batch}/`)) keys.push(o);
    expect(keys.filter((o) => o.key.endsWith('.mp4'))).toHaveLength(succeeded.length);
    for (const dir of folders.slice(0, 2)) {
      const out = join(dir, 'out');
      const left = existsSync(out) ? readdirSync(out, { recursive: true }).map(String) : [];
      expect(left.filter((f) => f.endsWith('.mp4') || f.endsWith('.jsonl'))).toEqual([]);
    }
    // A row has more than one job at the gateway only when its submit's outcome was unknown and the row says so.
    const s = await stats();
    const flagged = new Set(rows.filter((r) => (r.unknownSubmits ?? 0) > 0).map((r) => r.rowId));
    const paidTwice = Object.keys(s.idempotencyKeysBilledMoreThanOnce).map((k) => k.split(':')[2]!);
    expect(paidTwice.filter((row) => !flagged.has(row))).toEqual([]);

    const journal = keys.filter((o) => o.key.includes('/jobs.jsonl/'));
    const results = keys.filter((o) => o.key.includes('/manifest.jsonl/'));
    const per1000 = (n: number) => Math.round((n * 1000) / ROWS);
    console.log(
      `[cluster+store] ${ROWS} rows: ${failed.length} failed (unknown submits), ${flagged.size} flagged, ` +
        `${s.jobsCreated} jobs; recovered (s to the next job): ${JSON.stringify(recovered)}; per 1,000 rows: ` +
        `journal ${per1000(journal.length)} objects / ${per1000(journal.reduce((n, o) => n + o.size, 0) / 1024)} KiB, ` +
        `results ${per1000(results.length)} objects / ${per1000(results.reduce((n, o) => n + o.size, 0) / 1024)} KiB`,
    );
  }, 900_000);
});
