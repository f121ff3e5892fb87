// Reading a batch's jobs journal from the shared store cold (as a re-run, `results` or another batch's request
// index does), before and after compaction: N journal objects, one per job as submits write them, put on a
// local versitygw (bash scripts/s3.sh build), read whole twice, compacted, then read whole twice again. Prints
// one JSON line.
//   npx tsx bench/store-log-read.ts [objects=3000]
import { ObjectLog } from '../src/store/object-log';
import { S3Store } from '../src/store/s3-store';
import type { JournalEntry } from '../src/results/jobs-journal';
import { findVersitygw, startS3Server } from '../test/s3-server';

const objects = Number(process.argv[2] ?? 3000);
const versitygw = findVersitygw();
if (!versitygw) throw new Error('no versitygw: run `bash scripts/s3.sh build` first');
const s3 = await startS3Server(versitygw, 'vidbatch-bench');
Object.assign(process.env, s3.env);
const store = new S3Store(`s3://${s3.bucket}/bench`);
const log = new ObjectLog<JournalEntry>(store, 'batch-0000000000000000/jobs.jsonl/');
const t0 = Date.now() - 3_600_000;
const writing: Promise<unknown>[] = [];
for (let i = 0; i < objects; i++) {
  const at = new Date(t0 + i * 10).toISOString();
  const entry = {
    rowId: `r${i}`,
    jobId: `vid_${i}`,
    generation: 0,
    request: 'f'.repeat(32),
    line: i + 2,
    at,
  };
  writing.push(
    log.append([{ ...entry, model: 'sim-video-1', resolution: '720P', duration: 5 }], t0 + i * 10),
  );
  if (writing.length >= 32) await Promise.all(writing.splice(0));
}
await Promise.all(writing);

async function readMs(): Promise<number> {
  const started = performance.now();
  let records = 0;
  await log.readAll(() => (records += 1));
  if (records !== objects) throw new Error(`read ${records} records of ${objects}`);
  return Math.round(performance.now() - started);
}

const before = [await readMs(), await readMs()];
const compactStarted = performance.now();
const merged = await log.compact(Date.now(), 256);
const compactMs = Math.round(performance.now() - compactStarted);
const after = [await readMs(), await readMs()];
console.log(
  JSON.stringify({
    objects,
    readMs: before,
    compacted: merged,
    compactMs,
    objectsAfter: (await log.objects()).length,
    readMsAfter: after,
  }),
);
store.destroy();
await s3.stop();
