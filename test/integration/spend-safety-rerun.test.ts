// Re-runs, retries and outputs on a hostile gateway (Idempotency-Key IGNORED, the simulator's default): a batch
// that was cancelled or terminated and is run again, retry-failed of rows whose jobs may still finish, a CSV
// edited mid-run, and two batches sharing output folders. Every count comes from the simulator's own stats.
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'csv-stringify/sync';
import { afterEach, describe, expect, it } from 'vitest';
import { writeVbenchCsv } from '../../bench/vbench';
import { startBatch } from '../../src/client/batches';
import { retryFailed } from '../../src/client/retry-failed';
import { resumeSignal } from '../../src/contract/messages';
import { readJournal } from '../../src/results/jobs-journal';
import { readManifest } from '../../src/results/manifest';
import { FAST_POLL, testEnv, waitForProgress, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** Jobs the simulator made per identical request body: a row paid twice shows as a body with 2+ jobs. */
function paidTwice(e: TestEnv): number {
  return e.sim.stats().bodiesWithMultipleJobs;
}

describe('re-runs never pay again for a job vidbatch knows (Idempotency-Key ignored)', () => {
  it('a cancelled batch run again submits only the rows that never had a job: 30 rows, 30 jobs', async () => {
    env = await testEnv({ jobSeconds: 1.5, jobJitterSeconds: 0.5 });
    expect(env.sim.state.options.idempotency).toBe(false);
    await env.startWorker();
    const csv = join(env.dir, 'thirty.csv');
    await writeVbenchCsv(csv, 30, 'all_dimension', 300);
    const out = join(env.dir, 'out');
    const options = { concurrency: 6, poll: FAST_POLL, outDir: out, pageSize: 10 };
    const first = await startBatch(env.session, csv, options);
    await waitForProgress(first.handle, (p) => p.succeeded >= 8 && p.inFlight > 0);
    await first.handle.cancel();
    await expect(first.handle.result()).rejects.toThrow();
    const manifestFile = join(out, first.batchId, 'manifest.jsonl');
    const before = await readManifest(manifestFile);
    const succeededBefore = before.filter((r) => r.status === 'succeeded').length;
    const cancelledWithJob = before.filter((r) => r.errorCode === 'cancelled' && r.jobId).length;
    const jobsBefore = env.sim.stats().jobsCreated;
    console.log(
      `cancelled: ${succeededBefore} succeeded, ${cancelledWithJob} cancelled with a job, ${jobsBefore} jobs`,
    );
    expect(succeededBefore).toBeGreaterThanOrEqual(8);
    expect(cancelledWithJob).toBeGreaterThan(0);
    expect(jobsBefore).toBeLessThan(30);

    const again = await startBatch(env.session, csv, options);
    expect(again.batchId).toBe(first.batchId);
    expect(again.attached).toBe(false);
    const result = await again.handle.result();
    const jobs = env.sim.stats().jobsCreated;
    console.log(`re-run: ${jobs} jobs for 30 rows (${(jobs / 30).toFixed(2)} per row)`);
    expect(result).toMatchObject({ total: 30, succeeded: 30, failed: 0, skipped: succeededBefore });
    expect(jobs).toBe(30);
    expect(paidTwice(env)).toBe(0);
    const final = await readManifest(manifestFile);
    expect(final).toHaveLength(30);
    expect(final.every((r) => r.status === 'succeeded' && r.url)).toBe(true);
    // rows that succeeded before kept their job (not submitted again)
    for (const r of before.filter((x) => x.status === 'succeeded'))
      expect(final.find((f) => f.rowId === r.rowId)?.jobId).toBe(r.jobId);
  });

  it('a terminated batch run again finds its jobs in the journal and pays for none again', async () => {
    env = await testEnv({ jobSeconds: 2, jobJitterSeconds: 0.5 });
    await env.startWorker();
    const csv = join(env.dir, 'term.csv');
    await writeVbenchCsv(csv, 12, 'all_dimension', 400);
    const out = join(env.dir, 'out');
    const options = { concurrency: 12, poll: FAST_POLL, outDir: out };
    const first = await startBatch(env.session, csv, options);
    const dir = join(out, first.batchId);
    // Every row has its job (journalled) and none has finished: terminate now, nothing reaches the manifest.
    const deadline = Date.now() + 30_000;
    while ((await readJournal(dir)).filter((e) => e.jobId).length < 12 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    await first.handle.terminate('test: worker gone for good');
    const journalled = (await readJournal(dir)).filter((e) => e.jobId).length;
    expect(journalled).toBe(12);
    expect(env.sim.stats().jobsCreated).toBe(12);

    const result = await (await startBatch(env.session, csv, options)).handle.result();
    expect(result).toMatchObject({ total: 12, succeeded: 12, failed: 0 });
    console.log(`terminated + re-run: ${env.sim.stats().jobsCreated} jobs for 12 rows`);
    expect(env.sim.stats().jobsCreated).toBe(12);
    expect(paidTwice(env)).toBe(0);
    expect((await readManifest(join(dir, 'manifest.jsonl'))).every((r) => r.status === 'succeeded')).toBe(
      true,
    );
  });

  it('retry-failed checks the job of a row that failed on its deadline first: no new job when it completed', async () => {
    env = await testEnv({ jobSeconds: 2.5, jobJitterSeconds: 0 });
    await env.startWorker();
    const csv = join(env.dir, 'slow.csv');
    await writeVbenchCsv(csv, 4, 'all_dimension', 500);
    const out = join(env.dir, 'out');
    const first = await startBatch(env.session, csv, {
      poll: FAST_POLL,
      outDir: out,
      jobDeadlineMs: 800,
    });
    const failed = await first.handle.result();
    expect(failed).toMatchObject({ total: 4, failed: 4 });
    const manifest = await readManifest(failed.manifestPath);
    expect(manifest.every((r) => r.errorCode === 'deadline_exceeded' && r.jobId)).toBe(true);
    expect(env.sim.stats().jobsCreated).toBe(4);
    await new Promise((r) => setTimeout(r, 2500)); // the jobs finish at the gateway meanwhile

    const retry = await retryFailed(env.session, first.batchId, {
      code: 'deadline_exceeded',
      outRoot: out,
      poll: FAST_POLL,
    });
    expect(retry).toMatchObject({ rows: 4, retryOf: first.batchId });
    expect(retry!.batchId).not.toBe(first.batchId);
    const result = await retry!.handle.result();
    expect(result).toMatchObject({ total: 4, succeeded: 4, failed: 0 });
    console.log(`retry-failed of 4 deadline_exceeded rows: ${env.sim.stats().jobsCreated - 4} new jobs`);
    expect(env.sim.stats().jobsCreated).toBe(4);
    const retried = await readManifest(result.manifestPath);
    expect(retried.map((r) => r.jobId).sort()).toEqual(manifest.map((r) => r.jobId).sort());
  });
});

describe('a CSV edited while its batch runs', () => {
  it('pauses the batch with a reason naming the file; restoring it and resuming completes it', async () => {
    env = await testEnv({ jobSeconds: 0.6, jobJitterSeconds: 0.2 });
    await env.startWorker();
    const csv = join(env.dir, 'edited.csv');
    await writeVbenchCsv(csv, 12, 'all_dimension', 600);
    const original = await readFile(csv);
    const { handle } = await startBatch(env.session, csv, {
      concurrency: 2,
      pageSize: 3,
      poll: FAST_POLL,
      outDir: join(env.dir, 'out'),
    });
    await waitForProgress(handle, (p) => p.started >= 1);
    await writeFile(csv, Buffer.concat([original, Buffer.from('extra,"an extra row"\n')]));
    const paused = await waitForProgress(handle, (p) => p.pausedReason !== null, 30_000);
    expect(paused.pausedReason).toContain(csv);
    expect(paused.pausedReason).toMatch(/changed since the batch started: restore it and resume/);
    expect(paused.started).toBeLessThan(12);
    expect((await handle.describe()).status.name).toBe('RUNNING');

    await writeFile(csv, original);
    await handle.signal(resumeSignal);
    const result = await handle.result();
    expect(result).toMatchObject({ total: 12, succeeded: 12, failed: 0 });
    expect(env.sim.stats().jobsCreated).toBe(12);
  });
});

describe('outputs never mix', () => {
  it('two batches sharing --out and --download keep their own manifests and videos', async () => {
    env = await testEnv({ jobSeconds: 0.4 });
    await env.startWorker();
    const out = join(env.dir, 'out');
    const videos = join(env.dir, 'videos');
    const csvA = join(env.dir, 'a.csv');
    const csvB = join(env.dir, 'b.csv');
    const rows = (tag: string) =>
      stringify([['id', 'prompt'], ...['r1', 'r2', 'r3'].map((id) => [id, `${tag} ${id}`])]);
    await writeFile(csvA, rows('a calm lake'));
    await writeFile(csvB, rows('a stormy sea'));
    const options = { poll: FAST_POLL, outDir: out, downloadDir: videos };
    const [a, b] = await Promise.all([
      startBatch(env.session, csvA, options),
      startBatch(env.session, csvB, options),
    ]);
    const [ra, rb] = await Promise.all([a.handle.result(), b.handle.result()]);
    expect(ra.manifestPath).toBe(join(out, a.batchId, 'manifest.jsonl'));
    expect(rb.manifestPath).toBe(join(out, b.batchId, 'manifest.jsonl'));
    const shas = new Set<string>();
    for (const [batch, result, tag] of [
      [a, ra, 'a calm lake'],
      [b, rb, 'a stormy sea'],
    ] as const) {
      const manifest = await readManifest(result.manifestPath);
      expect(manifest).toHaveLength(3);
      for (const r of manifest) {
        expect(r.prompt).toBe(`${tag} ${r.rowId}`);
        expect(r.file).toBe(join(videos, batch.batchId, `${r.rowId}.mp4`));
        const sha = createHash('sha256')
          .update(await readFile(r.file!))
          .digest('hex');
        expect(sha).toBe(r.sha256);
        shas.add(sha);
      }
    }
    expect(shas.size).toBe(6); // six different videos, none overwritten
  });
});
