// A batch's input in the shared store, against a real S3-compatible server: put once under its sha256, read by
// page, written again when missing, and refused when it is elsewhere or gone.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRowActivities } from '../../src/activities/rows';
import { loadCsv } from '../../src/input/csv';
import { rowsFileKey } from '../../src/input/rows-file';
import { appendJournal, readJournal } from '../../src/results/jobs-journal';
import { appendResults, manifestPath, readManifest } from '../../src/results/manifest';
import { succeeded as succeededResult } from '../../bench/results';
import { inputKey, putInput } from '../../src/store/inputs';
import { S3Store } from '../../src/store/s3-store';
import { requireVersitygw, startS3Server, type S3Server } from '../s3-server';

const versitygw = requireVersitygw();
describe.runIf(versitygw)('a batch input in the store', () => {
  let server: S3Server;
  let store: S3Store;
  let csvPath: string;
  beforeAll(async () => {
    server = await startS3Server(versitygw!);
    Object.assign(process.env, server.env);
    store = new S3Store(`s3://${server.bucket}/p`);
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-store-input-'));
    csvPath = join(dir, 'in.csv');
    await writeFile(
      csvPath,
      '\uFEFFprompt\n' + Array.from({ length: 250 }, (_, i) => `prompt number ${i}`).join('\n') + '\n',
    );
  }, 60_000);
  afterAll(async () => {
    store?.destroy();
    await server?.stop();
  });

  it('is put once under its sha256; a file changed since it was validated is not put', async () => {
    const csv = await loadCsv(csvPath);
    const url = await putInput(store, csvPath, csv.sha256);
    expect(url).toBe(`s3://${server.bucket}/p/inputs/${csv.sha256}.csv`);
    const first = await store.head(inputKey(csv.sha256));
    expect(await putInput(store, csvPath, csv.sha256)).toBe(url);
    expect((await store.head(inputKey(csv.sha256)))!.etag).toBe(first!.etag);
    await expect(putInput(store, csvPath, 'f'.repeat(64))).rejects.toThrow(/changed while it was being put/);
    expect(await store.head(inputKey('f'.repeat(64)))).toBeUndefined();
  });

  it('keeps its journal and results as objects: a retried write is one object, and a re-run sees the jobs', async () => {
    process.env.VIDBATCH_STORE = `s3://${server.bucket}/p`;
    const csv = await loadCsv(csvPath);
    const url = await putInput(store, csvPath, csv.sha256);
    const outDir = store.urlOf('batch-00000000000000bb');
    const at = new Date(1_780_000_000_000).toISOString();
    await appendJournal(outDir, { rowId: csv.rows[0]!.id, jobId: 'vid_a', generation: 0, line: 2, at });
    await appendJournal(outDir, { rowId: csv.rows[1]!.id, unknown: true, generation: 0, line: 3, at });
    const result = succeededResult(csv.rows[2]!, at);
    expect(await appendResults(outDir, [result])).toBe(1);
    expect(await appendResults(outDir, [result])).toBe(0); // the same group, retried
    expect(await readJournal(outDir)).toHaveLength(2);
    expect((await readManifest(manifestPath(outDir))).map((r) => r.rowId)).toEqual([csv.rows[2]!.id]);
    const listed: string[] = [];
    for await (const o of store.list('batch-00000000000000bb/')) listed.push(o.key);
    expect(listed).toHaveLength(3);
    // What readRows tells a re-run of the batch: the job to check, the unknown outcome, the row done.
    const roots = { input: [], out: [store.url], download: [] };
    const page = await createRowActivities('out', roots, store).readRows({
      csvPath: url,
      csvSha256: csv.sha256,
      offset: 0,
      limit: 3,
      batchId: 'batch-00000000000000bb',
      outDir,
    });
    expect(page.map((r) => r.prior)).toMatchObject([
      { jobId: 'vid_a' },
      { unknownSubmits: 1 },
      { status: 'succeeded' },
    ]);
    // A folder outside the store's prefix is refused.
    await expect(
      createRowActivities('out', roots, store).readRows({
        csvPath: url,
        csvSha256: csv.sha256,
        offset: 0,
        limit: 1,
        batchId: 'batch-00000000000000bb',
        outDir: `s3://${server.bucket}/elsewhere/batch-00000000000000bb`,
      }),
    ).rejects.toThrow(/outside the folders this worker may use.*VIDBATCH_STORE/);
  });

  it('waits out a store that is away for a journal write, within its bound', async () => {
    process.env.VIDBATCH_STORE = `s3://${server.bucket}/p`;
    const outDir = store.urlOf('batch-00000000000000cc');
    const at = new Date().toISOString();
    const outage = server.restart(2_000);
    await new Promise((r) => setTimeout(r, 200)); // the server is down now
    await appendJournal(outDir, { rowId: 'r1', jobId: 'vid_1', generation: 0, at });
    await outage;
    expect(await readJournal(outDir)).toMatchObject([{ rowId: 'r1', jobId: 'vid_1' }]);
    // With no time left to wait, the write fails at once (the submit says its journal line is missing).
    const down = server.restart(2_000);
    await new Promise((r) => setTimeout(r, 200));
    await expect(
      appendJournal(outDir, { rowId: 'r2', jobId: 'vid_2', generation: 0, at }, Date.now()),
    ).rejects.toThrow();
    await down;
  });

  it('is read by page, its rows written to the store when missing; elsewhere or gone, it is refused', async () => {
    const csv = await loadCsv(csvPath);
    const url = await putInput(store, csvPath, csv.sha256);
    const out = await mkdtemp(join(tmpdir(), 'vidbatch-store-out-'));
    const activities = createRowActivities(out, { input: [out], out: [out], download: [out] }, store);
    const input = { csvPath: url, csvSha256: csv.sha256, limit: 100, batchId: 'batch-00000000000000aa' };
    expect(await activities.readRows({ ...input, offset: 200 })).toEqual(csv.rows.slice(200));
    expect(await store.head(rowsFileKey(csv.sha256))).toBeDefined();
    // Deleted from the store (a lifecycle rule, a clean-up): written again from the CSV there.
    await store.delete(rowsFileKey(csv.sha256));
    expect(await activities.readRows({ ...input, offset: 0 })).toEqual(csv.rows.slice(0, 100));
    // Another store's URL, or a worker with no store: refused, naming the setting.
    await expect(
      activities.readRows({ ...input, csvPath: `s3://other-bucket/inputs/${csv.sha256}.csv`, offset: 0 }),
    ).rejects.toThrow(/outside the folders this worker may use.*VIDBATCH_STORE/);
    await expect(createRowActivities(out).readRows({ ...input, offset: 0 })).rejects.toThrow(
      /outside the folders this worker may use \(none\).*VIDBATCH_STORE/,
    );
    // The CSV gone from the store: the batch is told to put it back.
    await store.delete(inputKey(csv.sha256));
    await expect(activities.readRows({ ...input, offset: 100 })).rejects.toThrow(/missing from the store/);
  });
});
