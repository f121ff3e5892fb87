import { findVersitygw, startS3Server } from '../test/s3-server';
import { S3Store } from '../src/store/s3-store';
import { ObjectLog } from '../src/store/object-log';
async function main() {
const n = Number(process.argv[2] ?? 3000);
const s3 = await startS3Server(findVersitygw()!);
Object.assign(process.env, s3.env);
const store = new S3Store(`s3://${s3.bucket}/t`);
const log = new ObjectLog<{ rowId: string }>(store, 'b/jobs.jsonl/');
const t0 = Date.now();
const batch: Promise<unknown>[] = [];
for (let i = 0; i < n; i++) {
  batch.push(log.append([{ rowId: `r${i}` }], 1_700_000_000_000 + i));
  if (batch.length >= 32) await Promise.all(batch.splice(0));
}
await Promise.all(batch);
console.log(`wrote ${n} in ${Date.now() - t0} ms`);
for (let k = 0; k < 2; k++) {
  const t1 = Date.now();
  let c = 0;
  await log.readAll(() => c++);
  console.log(`read ${c} records in ${Date.now() - t1} ms`);
}
const t2 = Date.now();
const merged = await log.compact(Date.now(), 256);
console.log(`compacted ${merged} parts in ${Date.now() - t2} ms`);
for (let k = 0; k < 2; k++) {
  const t1 = Date.now();
  let c = 0;
  await log.readAll(() => c++);
  console.log(`after compaction: read ${c} records in ${Date.now() - t1} ms`);
}
store.destroy();
await s3.stop();
}
void main();
