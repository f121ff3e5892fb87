// A batch's input in the shared store, against a real S3-compatible server: put once under its sha256, read by
// page, written again when missing, and refused when it is elsewhere or gone.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRowActivities } from '../../src/activities/rows';
import { loadCsv } from '../../src/input/csv';
import { rowsFileKey } from '../../src/input/rows-file';
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
