// Workers that share no folder with the terminal that starts the batch, as on separate machines: `vidbatch
// server`, two `vidbatch worker`s each in its own folder, and `run --detach` from a third folder, all with one
// VIDBATCH_STORE on a real S3-compatible server (versitygw). The CSV and its rows travel through the store, so
// the batch finishes after the starter's CSV is deleted, and the workers never read the starter's folder.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HeadObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { stringify } from 'csv-stringify/sync';
import { vbenchPrompts, writeVbenchCsv } from '../../bench/vbench';
import { readManifest } from '../../src/results/manifest';
import { startSimulator, type SimulatorOptions } from '../../src/simulator/server';
import { requireVersitygw, startS3Server, type S3Server } from '../s3-server';
import { background, vidbatch, FAST_POLL_FLAGS } from './cli-helpers';

const versitygw = requireVersitygw();
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/**
 * An S3-compatible server (`bucket`), a simulator (hostile as the spec allows by default: Idempotency-Key
 * ignored), and `vidbatch server` in one folder, two `vidbatch worker`s each in its own folder, and a starter's
 * folder, all with one VIDBATCH_STORE: machines that share nothing but Temporal, the store and the gateway key.
 */
async function threeMachines(bucket: string | undefined, simulator: SimulatorOptions) {
  const s3 = await startS3Server(versitygw!, bucket);
  cleanups.push(() => s3.stop());
  const sim = await startSimulator(simulator);
  cleanups.push(() => sim.close());
  const root = await mkdtemp(join(tmpdir(), 'vidbatch-store-'));
  const [serverDir, starterDir, ...workerDirs] = ['server', 'starter', 'worker-a', 'worker-b'].map((d) =>
    join(root, d),
  );
  for (const d of [serverDir!, starterDir!, ...workerDirs]) await mkdir(d);
  const server = background(['server'], { cwd: serverDir! });
  cleanups.push(() => server.stop());
  const address = (await server.waitFor(/Temporal gRPC address: (\S+)/))[1]!;
  const shared = { TEMPORAL_ADDRESS: address, VIDBATCH_STORE: `s3://${s3.bucket}/team`, ...s3.env };
  const startWorker = async (dir: string) => {
    // Each worker reads CSVs only under its own folder (VIDBATCH_INPUT_ROOT's default): never the starter's.
    const worker = background(['worker'], {
      cwd: dir,
      env: { ...shared, GATEWAY_BASE_URL: sim.baseUrl, GATEWAY_API_KEY: sim.apiKey },
    });
    cleanups.push(() => worker.stop());
    await worker.waitFor(/vidbatch worker polling task queue/);
    return worker;
  };
  const workers = [];
  for (const dir of workerDirs) workers.push(await startWorker(dir));
  return { s3, sim, root, starterDir: starterDir!, workerDirs, shared, workers, startWorker };
}

/** Each row's final state, as the batch's manifest in the store holds it (read as any vidbatch process does). */
async function recordedRows(s3: S3Server, batchId: string) {
  const settings = { ...s3.env, VIDBATCH_STORE: `s3://${s3.bucket}/team` };
  const before = Object.fromEntries(Object.keys(settings).map((k) => [k, process.env[k]]));
  Object.assign(process.env, settings);
  try {
    const manifest = await readManifest(`s3://${s3.bucket}/team/${batchId}/manifest.jsonl`);
    return new Map(manifest.map((r) => [r.rowId, r]));
  } finally {
    // The CLI processes this test spawns inherit its environment: leave it as it was.
    for (const [k, v] of Object.entries(before))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  }
}

describe.runIf(versitygw)('VIDBATCH_STORE: the input through an S3-compatible store', () => {
  it('runs a batch on workers in other folders after the starter deleted its CSV', async () => {
    const { s3, sim, root, starterDir, workerDirs, shared } = await threeMachines(undefined, {
      jobSeconds: 1,
      jobJitterSeconds: 0.5,
    });

    const csv = join(starterDir, 'prompts.csv');
    await writeVbenchCsv(csv, 24, 'all_dimension', 7);
    // The starter holds no gateway key: it validates, puts the CSV in the store and starts the batch.
    const started = await vidbatch(['run', 'prompts.csv', '--detach', ...FAST_POLL_FLAGS], {
      cwd: starterDir,
      env: shared,
    });
    expect(started.code, started.stderr).toBe(0);
    expect(started.stderr).not.toMatch(/Warning/);
    const batchId = /Started batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(started.stderr)![1]!;
    // It holds no gateway settings: the batch runs for the target its workers declare, and run says so.
    expect(started.stderr).toContain(
      `for ${sim.baseUrl} (the target the workers on task queue "vidbatch-1" declare)`,
    );
    await rm(csv);

    const watched = await vidbatch(['watch', batchId], { cwd: starterDir, env: shared });
    expect(watched.code, watched.stderr).toBe(0);
    expect(watched.stdout).toContain(`${batchId}: 24 succeeded, 0 failed of 24`);
    expect(sim.stats().jobsCreated).toBe(24);

    // In the bucket, under the prefix: the CSV by its sha256 and its rows file; in no worker's folder.
    const client = s3.client();
    const keysUnder = async (prefix: string) =>
      (
        (await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }))).Contents ?? []
      ).map((o) => o.Key!);
    cleanups.push(() => Promise.resolve(client.destroy()));
    const keys = await keysUnder('team/');
    expect(keys.filter((k) => /^team\/inputs\/[0-9a-f]{64}\.csv$/.test(k))).toHaveLength(1);
    expect(keys.filter((k) => /^team\/\.rows\/[0-9a-f]{32}-plain\.jsonl$/.test(k))).toHaveLength(1);
    for (const dir of workerDirs) expect(existsSync(join(dir, 'out', '.rows'))).toBe(false);

    // A CSV that is itself in a bucket: validated as it streams, copied into the store, run the same way.
    const inBucket = join(root, 'from-bucket.csv');
    await writeVbenchCsv(inBucket, 6, 'all_dimension', 99);
    await client.send(
      new PutObjectCommand({
        Bucket: s3.bucket,
        Key: 'uploads/from-bucket.csv',
        Body: await readFile(inBucket),
      }),
    );
    const second = await vidbatch(['run', `s3://${s3.bucket}/uploads/from-bucket.csv`, ...FAST_POLL_FLAGS], {
      cwd: starterDir,
      env: shared,
    });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/6 succeeded, 0 failed of 6/);
    expect(sim.stats().jobsCreated).toBe(30);
    // Every row's result and every job in the store: the results in groups, one object per job.
    const rows = await recordedRows(s3, batchId);
    expect(rows.size).toBe(24);
    const stored = `s3://${s3.bucket}/team/${batchId}/`;
    expect([...rows.values()].every((r) => r.status === 'succeeded' && r.file?.startsWith(stored))).toBe(
      true,
    );
    expect((await keysUnder(`team/${batchId}/manifest.jsonl/`)).length).toBeGreaterThan(0);
    expect(await keysUnder(`team/${batchId}/jobs.jsonl/`)).toHaveLength(24);
    expect((await keysUnder('team/inputs/')).length).toBe(2);
    // Every video in the bucket, with its sha256; nothing left in either worker's folders.
    const videos = (await keysUnder(`team/${batchId}/`)).filter((k) => k.endsWith('.mp4'));
    expect(videos).toHaveLength(24);
    const one = [...rows.values()][0]!;
    const head = await client.send(
      new HeadObjectCommand({ Bucket: s3.bucket, Key: `team/${batchId}/${one.rowId}.mp4` }),
    );
    expect(head.Metadata?.sha256).toBe(one.sha256);
    for (const dir of workerDirs) {
      const left = existsSync(join(dir, 'out')) ? readdirSync(join(dir, 'out'), { recursive: true }) : [];
      expect(left.filter((f) => String(f).endsWith('.mp4') || String(f).endsWith('.jsonl'))).toEqual([]);
    }
    // `download` on the starter's machine copies them from the store, verified.
    const download = await vidbatch(['download', batchId], { cwd: starterDir, env: shared });
    expect(download.code, download.stderr).toBe(0);
    expect(download.stdout).toContain(`24 videos on disk, verified: 0 already there, 24 fetched into`);
    expect(readdirSync(join(starterDir, 'out', batchId)).filter((f) => f.endsWith('.mp4'))).toHaveLength(24);
    // The gallery made there plays those copies.
    const review = await vidbatch(['review', batchId], { cwd: starterDir, env: shared });
    expect(review.code, review.stderr).toBe(0);
    const page = readFileSync(join(starterDir, 'out', batchId, 'review.html'), 'utf8');
    expect(page.match(/"local":true/g)).toHaveLength(24);
    // `results` and `status` on the starter's machine read the batch from the store.
    const results = await vidbatch(['results', batchId], { cwd: starterDir, env: shared });
    expect(results.code, results.stderr).toBe(0);
    expect(results.stdout).toMatch(/^24 succeeded, 0 failed:/);
    expect(existsSync(join(starterDir, 'out', batchId, 'succeeded.csv'))).toBe(true);
    expect(results.stdout).toMatch(/jobs made: 24 for 24 rows \(24 kept\)/);
    // Once Temporal has forgotten the batch (retention; here another server that never knew it), its results
    // are still read from the store.
    const forgotten = await vidbatch(['results', batchId, '--json'], {
      cwd: starterDir,
      env: { ...shared, TEMPORAL_ADDRESS: inject('temporalAddress') },
    });
    expect(forgotten.code, forgotten.stderr).toBe(0);
    expect(JSON.parse(forgotten.stdout)).toMatchObject({ succeeded: 24, failed: 0 });
  }, 240_000);

  it('finishes every row once through an object-store outage and a SIGKILLed worker', async () => {
    const { s3, sim, starterDir, workerDirs, shared, workers, startWorker } = await threeMachines(
      'vidbatch-faults',
      { jobSeconds: 2, jobJitterSeconds: 1 },
    );
    await writeVbenchCsv(join(starterDir, 'prompts.csv'), 60, 'all_dimension', 3);
    // Small pages and window: the batch reads rows from the store all through the run, outage included.
    const started = await vidbatch(
      ['run', 'prompts.csv', '--detach', '--page-size', '5', '--concurrency', '6', ...FAST_POLL_FLAGS],
      { cwd: starterDir, env: shared },
    );
    expect(started.code, started.stderr).toBe(0);
    const batchId = /Started batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(started.stderr)![1]!;
    const jobsPast = async (n: number) => {
      const since = Date.now();
      while (sim.stats().jobsCreated <= n) await new Promise((r) => setTimeout(r, 100));
      return Date.now() - since;
    };

    await jobsPast(10);
    // The object server down for 5 s, then back with its objects: pages are read again once it answers.
    const beforeOutage = sim.stats().jobsCreated;
    await s3.restart(5_000);
    const duringOutage = sim.stats().jobsCreated - beforeOutage;
    const afterOutage = await jobsPast(sim.stats().jobsCreated);
    await jobsPast(25);
    // One worker killed without a chance to finish anything, and started again in its folder.
    workers[0]!.child.kill('SIGKILL');
    await workers[0]!.done;
    const killedAt = sim.stats().jobsCreated;
    await startWorker(workerDirs[0]!);
    const afterKill = await jobsPast(killedAt);
    console.log(
      `store outage: ${duringOutage} jobs made in the 5 s it was down (rows already read), the next ${afterOutage} ms after it was back; SIGKILL: next job ${afterKill} ms after the new worker polled`,
    );

    const watched = await vidbatch(['watch', batchId], { cwd: starterDir, env: shared });
    expect(watched.code, watched.stderr).toBe(0);
    expect(watched.stdout).toContain(`${batchId}: 60 succeeded, 0 failed of 60`);
    const rows = await recordedRows(s3, batchId);
    expect(rows.size).toBe(60);
    const stored = `s3://${s3.bucket}/team/${batchId}/`;
    expect([...rows.values()].filter((r) => !r.file?.startsWith(stored))).toEqual([]);
    // A row whose submit was cut by the kill counts it as unknown (it may have been billed twice, and says so);
    // no other row paid twice.
    const flagged = [...rows.values()].filter((r) => (r.unknownSubmits ?? 0) > 0).length;
    expect(sim.stats().jobsCreated).toBeLessThanOrEqual(60 + flagged);
  }, 300_000);

  it('a batch cancelled on one machine and run again on another pays for no job twice, and reviews there', async () => {
    const { s3, sim, root, starterDir, shared } = await threeMachines('vidbatch-rerun', {
      jobSeconds: 4,
      jobJitterSeconds: 1,
    });
    await writeVbenchCsv(join(starterDir, 'prompts.csv'), 30, 'all_dimension', 5);
    const started = await vidbatch(
      ['run', 'prompts.csv', '--detach', '--concurrency', '10', ...FAST_POLL_FLAGS],
      { cwd: starterDir, env: shared },
    );
    expect(started.code, started.stderr).toBe(0);
    const batchId = /Started batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(started.stderr)![1]!;
    while (sim.stats().jobsCreated < 12) await new Promise((r) => setTimeout(r, 100));
    const cancelled = await vidbatch(['cancel', batchId], { cwd: starterDir, env: shared });
    expect(cancelled.code, cancelled.stderr).toBe(0);

    // Another machine, with its own copy of the file and none of the first one's folders.
    const other = join(root, 'other-starter');
    await mkdir(other);
    await writeFile(join(other, 'prompts.csv'), await readFile(join(starterDir, 'prompts.csv')));
    // The plan there reads what the batch did from the store: every job made is checked, the rest are new.
    // (Once the submits the cancel let finish have ended: none for 2 s.)
    let made = -1;
    while (made !== sim.stats().jobsCreated) {
      made = sim.stats().jobsCreated;
      await new Promise((r) => setTimeout(r, 2_000));
    }
    const plan = await vidbatch(['run', 'prompts.csv', '--dry-run'], { cwd: other, env: shared });
    expect(plan.code, plan.stderr).toBe(0);
    const { reuse } = JSON.parse(plan.stdout) as { reuse: Record<string, number> };
    expect(reuse.doneEarlier! + reuse.followed!).toBe(made);
    expect(reuse.newJobs).toBe(30 - made);
    // Without VIDBATCH_STORE there, the batch cannot be run again (its journal is in the store): said, nothing sent.
    const noStore = { ...shared, VIDBATCH_STORE: '' };
    const unset = await vidbatch(['run', 'prompts.csv'], { cwd: other, env: noStore });
    expect(unset.code, unset.stderr).toBe(2);
    expect(unset.stderr).toContain(`${batchId} keeps its journal and results in s3://${s3.bucket}/team/`);
    expect(readdirSync(other)).toEqual(['prompts.csv']);
    const again = await vidbatch(['run', 'prompts.csv', ...FAST_POLL_FLAGS], { cwd: other, env: shared });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain(`${batchId} was cancelled: running it again`);
    expect(again.stdout).toContain(`${batchId}: 30 succeeded, 0 failed of 30`);
    // The jobs the first run made were found in the store's journal and checked, not bought again.
    const rows = await recordedRows(s3, batchId);
    const flagged = [...rows.values()].filter((r) => (r.unknownSubmits ?? 0) > 0).length;
    expect(flagged).toBe(0);
    expect(sim.stats().jobsCreated).toBe(30);
    expect(new Set([...rows.values()].map((r) => r.jobId)).size).toBe(30);

    // Reviewed where nothing was downloaded: the page plays the store's copies by signed links, and
    // `review --serve` streams them from the store by range.
    const review = await vidbatch(['review', batchId], { cwd: other, env: shared });
    expect(review.code, review.stderr).toBe(0);
    expect(review.stdout).toContain(`30 rows: ${join(other, 'out', batchId, 'review.html')}`);
    const page = readFileSync(join(other, 'out', batchId, 'review.html'), 'utf8');
    const links = [...page.matchAll(/"src":"([^"]*X-Amz-Signature[^"]*)"/g)].map(
      (m) => JSON.parse(`"${m[1]!}"`) as string,
    );
    expect(links).toHaveLength(30);
    expect(page).not.toContain(s3.env.AWS_SECRET_ACCESS_KEY!);
    const one = rows.get(
      new URL(links[0]!).pathname
        .split('/')
        .pop()!
        .replace(/\.mp4$/, ''),
    )!;
    const video = Buffer.from(await (await fetch(links[0]!)).arrayBuffer());
    expect(createHash('sha256').update(video).digest('hex')).toBe(one.sha256);
    const served = background(['review', batchId, '--serve', '--port', '0'], { cwd: other, env: shared });
    cleanups.push(() => served.stop());
    const url = (await served.waitFor(/at (http:\/\/\S+) /))[1]!;
    const head = await fetch(`${url}video/${one.rowId}`, { headers: { range: 'bytes=0-99' } });
    expect(head.status).toBe(206);
    expect(head.headers.get('content-range')).toBe(`bytes 0-99/${one.bytes}`);
    expect(Buffer.from(await head.arrayBuffer()).equals(video.subarray(0, 100))).toBe(true);
  }, 300_000);

  it('an edited CSV pays for its changed rows only: the other batches in the store are its request index', async () => {
    const { s3, sim, root, starterDir, shared } = await threeMachines('vidbatch-index', {
      jobSeconds: 1,
      jobJitterSeconds: 0.5,
    });
    const prompts = (await vbenchPrompts()).slice(0, 13);
    const write = (dir: string, rows: string[][]) =>
      writeFile(join(dir, 'prompts.csv'), stringify([['id', 'prompt'], ...rows]));
    const rows = prompts.slice(0, 12).map((p, i) => [`r${i + 1}`, p]);
    await write(starterDir, rows);
    const first = await vidbatch(['run', 'prompts.csv', ...FAST_POLL_FLAGS], {
      cwd: starterDir,
      env: shared,
    });
    expect(first.code, first.stderr).toBe(0);
    const batchA = /(batch-[0-9a-f]{16}-[0-9a-f]{8}):/.exec(first.stdout)![1]!;
    expect(sim.stats().jobsCreated).toBe(12);

    // Another machine, the file fixed there: one prompt changed, one row added. It has no folder of the first.
    const other = join(root, 'other-starter');
    await mkdir(other);
    const edited = [...rows, ['r13', prompts[12]!]];
    edited[2] = ['r3', `${rows[2]![1]} at dusk`];
    await write(other, edited);
    const plan = await vidbatch(['plan', 'prompts.csv'], { cwd: other, env: shared });
    expect(plan.code, plan.stderr).toBe(0);
    expect((JSON.parse(plan.stdout) as { reuse: unknown }).reuse).toEqual({
      doneEarlier: 0,
      reused: 11,
      followed: 0,
      settled: 0,
      newJobs: 2,
    });
    expect(plan.stderr).toContain(`11 reuse videos other batches in s3://${s3.bucket}/team paid for`);
    const second = await vidbatch(['run', 'prompts.csv', ...FAST_POLL_FLAGS], { cwd: other, env: shared });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain('13 succeeded, 0 failed of 13');
    expect(sim.stats().jobsCreated).toBe(14);
    const batchB = /(batch-[0-9a-f]{16}-[0-9a-f]{8}):/.exec(second.stdout)![1]!;
    const recorded = [...(await recordedRows(s3, batchB)).values()];
    const reused = recorded.filter((r) => r.reusedFrom);
    expect(reused.map((r) => r.reusedFrom!.batchId)).toEqual(Array(11).fill(batchA));
    // Each reused video copied beside the new batch's results in the bucket, its sha256 kept with it.
    const client = s3.client();
    cleanups.push(() => Promise.resolve(client.destroy()));
    for (const r of reused) {
      expect(r.file).toBe(`s3://${s3.bucket}/team/${batchB}/${r.rowId}.mp4`);
      const head = await client.send(
        new HeadObjectCommand({ Bucket: s3.bucket, Key: `team/${batchB}/${r.rowId}.mp4` }),
      );
      expect(head.ContentLength).toBe(r.bytes);
      expect(head.Metadata?.sha256).toBe(r.sha256);
    }
    expect(
      recorded
        .filter((r) => !r.reusedFrom)
        .map((r) => r.rowId)
        .sort(),
    ).toEqual(['r13', 'r3']);
  }, 240_000);

  it('claimed before paid across machines: an edited copy started while the first batch waits on the rate budget', async () => {
    const { sim, root, starterDir, shared } = await threeMachines('vidbatch-claims', {
      rateLimit: 2,
      jobSeconds: 1,
      jobJitterSeconds: 0,
    });
    const prompts = (await vbenchPrompts()).slice(100, 124);
    const write = (dir: string, rows: string[][]) =>
      writeFile(join(dir, 'prompts.csv'), stringify([['id', 'prompt'], ...rows]));
    const rows = prompts.map((p, i) => [`c${i + 1}`, p]);
    await write(starterDir, rows);
    const detached = ['--detach', '--concurrency', '50', ...FAST_POLL_FLAGS];
    const first = await vidbatch(['run', 'prompts.csv', ...detached], { cwd: starterDir, env: shared });
    expect(first.code, first.stderr).toBe(0);
    const batchA = /Started batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(first.stderr)![1]!;
    for (let i = 0; sim.stats().jobsCreated < 3; i++) {
      if (i > 600) throw new Error('the first batch made no jobs');
      await new Promise((r) => setTimeout(r, 100));
    }
    // Another machine, the file edited there while the first batch's rows still wait for the budget.
    const other = join(root, 'other-starter');
    await mkdir(other);
    const edited = rows.map((r) => [...r]);
    edited[4] = ['c5', `${rows[4]![1]} at dusk`];
    await write(other, edited);
    const second = await vidbatch(['run', 'prompts.csv', ...detached], { cwd: other, env: shared });
    expect(second.code, second.stderr).toBe(0);
    const batchB = /Started batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(second.stderr)![1]!;
    for (const [dir, batchId] of [
      [starterDir, batchA],
      [other, batchB],
    ] as const) {
      const watched = await vidbatch(['watch', batchId], { cwd: dir, env: shared });
      expect(watched.stdout, watched.stderr).toContain(`${batchId}: 24 succeeded, 0 failed of 24`);
    }
    console.log(`two machines on one store: ${sim.stats().jobsCreated} jobs for 25 distinct requests`);
    expect(sim.stats().jobsCreated).toBe(25);
  }, 240_000);

  it('prompt rewrites kept in the store are paid once, whichever machine asks: plan --enhance here, run --enhance on the workers', async () => {
    const { s3, sim, starterDir, workerDirs, shared } = await threeMachines('vidbatch-enhance', {
      jobSeconds: 1,
      jobJitterSeconds: 0.5,
    });
    await writeVbenchCsv(join(starterDir, 'prompts.csv'), 8, 'all_dimension', 11);
    // The starter has the key too here: plan --enhance asks the gateway for the rewrites to review.
    const keyed = { ...shared, GATEWAY_BASE_URL: sim.baseUrl, GATEWAY_API_KEY: sim.apiKey };
    const plan = await vidbatch(['plan', 'prompts.csv', '--enhance'], { cwd: starterDir, env: keyed });
    expect(plan.code, plan.stderr).toBe(0);
    expect(sim.stats().chatCallsTotal).toBe(8);
    expect(plan.stderr).toContain(`0 kept from earlier rewrites in s3://${s3.bucket}/team/enhanced`);
    // The workers, on other machines, find them in the store: no chat call is paid again.
    const run = await vidbatch(['run', 'prompts.csv', '--enhance', ...FAST_POLL_FLAGS], {
      cwd: starterDir,
      env: shared,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('8 succeeded, 0 failed of 8');
    expect(sim.stats().chatCallsTotal).toBe(8);
    expect(sim.stats().jobsCreated).toBe(8);
    for (const dir of workerDirs) expect(existsSync(join(dir, 'out', 'enhanced'))).toBe(false);
  }, 240_000);

  it('retry-failed from one machine is seen from another: its rows are not retried there again', async () => {
    const { sim, root, starterDir, shared } = await threeMachines('vidbatch-retry', {
      jobSeconds: 1,
      faults: { moderationWords: ['forbidden'] },
    });
    const prompts = [
      'a forbidden scene',
      'another forbidden scene',
      'a calm lake',
      'a red kite',
      'a quiet street',
    ];
    await writeFile(
      join(starterDir, 'prompts.csv'),
      stringify([['id', 'prompt'], ...prompts.map((p, i) => [`r${i + 1}`, `${p} ${i}`])]),
    );
    const first = await vidbatch(['run', 'prompts.csv', ...FAST_POLL_FLAGS], {
      cwd: starterDir,
      env: shared,
    });
    expect(first.code, first.stderr).toBe(3);
    const batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8}):/.exec(first.stdout)![1]!;
    expect(first.stdout).toContain('3 succeeded, 2 failed of 5');
    const retry = await vidbatch(
      ['retry-failed', batchId, '--code', 'content_moderation', ...FAST_POLL_FLAGS],
      {
        cwd: starterDir,
        env: shared,
      },
    );
    expect(retry.code, retry.stderr).toBe(3);
    expect(sim.stats().jobsCreated).toBe(7);
    const retryId = /Started (batch-[0-9a-f]{16}-[0-9a-f]{8}): 2 failed rows/.exec(retry.stderr)![1]!;
    // Its CSV is in this machine's folder of the batch and in the store; nothing else is made here.
    expect(readdirSync(starterDir).sort()).toEqual(['out', 'prompts.csv']);
    expect(existsSync(join(starterDir, 'out', batchId, `retry-of-${batchId}-content_moderation.csv`))).toBe(
      true,
    );
    // Another machine sees that retry, and leaves its rows to it.
    const other = join(root, 'other-starter');
    await mkdir(other);
    const again = await vidbatch(['retry-failed', batchId, ...FAST_POLL_FLAGS], { cwd: other, env: shared });
    expect(again.stderr).toContain(`2 row(s) left out: an earlier retry-failed took them (${retryId})`);
    expect(sim.stats().jobsCreated).toBe(7);
  }, 240_000);

  it('refuses a CSV in a bucket that is missing, has errors, or comes without VIDBATCH_STORE, submitting nothing', async () => {
    const s3 = await startS3Server(versitygw!);
    cleanups.push(() => s3.stop());
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-store-bad-'));
    const env = { VIDBATCH_STORE: `s3://${s3.bucket}`, ...s3.env };
    const client = s3.client();
    cleanups.push(() => Promise.resolve(client.destroy()));
    await client.send(
      new PutObjectCommand({
        Bucket: s3.bucket,
        Key: 'bad.csv',
        Body: 'prompt,duration\na cat,5\na dog,eleven\n',
      }),
    );
    const url = `s3://${s3.bucket}`;
    const missing = await vidbatch(['run', `${url}/nothing.csv`, '--detach'], { cwd: dir, env });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`${url}/nothing.csv: no such object`);
    const bad = await vidbatch(['run', `${url}/bad.csv`, '--detach'], { cwd: dir, env });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(new RegExp(`${url}/bad\\.csv:3.*duration`));
    const unset = await vidbatch(['run', `${url}/bad.csv`, '--detach'], { cwd: dir, env: { ...s3.env } });
    expect(unset.code).toBe(2);
    expect(unset.stderr).toMatch(/needs VIDBATCH_STORE/);
    // Nothing started: no batch's input was put in the store.
    const listed = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: 'inputs/' }));
    expect(listed.Contents ?? []).toEqual([]);
  });
});
