// What a batch leaves in the shared store, per 1,000 rows: `vidbatch run --simulate` with VIDBATCH_STORE on a
// local versitygw (bash scripts/s3.sh build), then the objects and bytes under the prefix, by kind (the CSV, its
// rows, the jobs journal, the results, the videos), and the batch's wall time; with `local`, the same run without the
// store, for its wall time. Prints one JSON line.
//   npx tsx bench/store-objects.ts [rows=1000] [local]
import { spawnSync } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { S3Store } from '../src/store/s3-store';
import { findVersitygw, startS3Server } from '../test/s3-server';
import { writeVbenchCsv } from './vbench';

const rows = Number(process.argv[2] ?? 1000);
const local = process.argv[3] === 'local';
const versitygw = findVersitygw();
if (!versitygw) throw new Error('no versitygw: run `bash scripts/s3.sh build` first');
const s3 = await startS3Server(versitygw, 'vidbatch-bench');
const dir = await mkdtemp(join(tmpdir(), 'vidbatch-store-bench-'));
await writeVbenchCsv(join(dir, 'prompts.csv'), rows, 'all_dimension_longer');
const store = `s3://${s3.bucket}/bench`;
const cli = fileURLToPath(new URL('../bin/vidbatch.mjs', import.meta.url));
const started = performance.now();
const run = spawnSync(
  process.execPath,
  [cli, 'run', 'prompts.csv', '--simulate', '--sim-job-seconds', '2', '--concurrency', '300', '--json'],
  {
    cwd: dir,
    env: { ...process.env, ...(local ? {} : { ...s3.env, VIDBATCH_STORE: store }) },
    encoding: 'utf8',
  },
);
const seconds = (performance.now() - started) / 1000;
if (run.status !== 0) throw new Error(`run exited ${run.status}:\n${run.stderr}`);
if (local) {
  await s3.stop();
  console.log(JSON.stringify({ rows, store: false, seconds: Math.round(seconds) }));
  process.exit(0);
}

Object.assign(process.env, s3.env);
const objects = new S3Store(store);
const kinds: Record<string, { objects: number; bytes: number }> = {};
for await (const { key, size } of objects.list('')) {
  const kind = key.startsWith('inputs/')
    ? 'csv'
    : key.startsWith('.rows/')
      ? 'rows'
      : key.includes('/jobs.jsonl/')
        ? 'journal'
        : key.includes('/manifest.jsonl/')
          ? 'results'
          : key.endsWith('.mp4')
            ? 'videos'
            : 'other';
  kinds[kind] ??= { objects: 0, bytes: 0 };
  kinds[kind].objects += 1;
  kinds[kind].bytes += size;
}
objects.destroy();
await s3.stop();
const per1000 = Object.fromEntries(
  Object.entries(kinds).map(([k, v]) => [
    k,
    { objects: Math.round((v.objects * 1000) / rows), kib: Math.round((v.bytes * 1000) / rows / 1024) },
  ]),
);
console.log(JSON.stringify({ rows, store: true, seconds: Math.round(seconds), per1000Rows: per1000 }));
