// What a worker holds to read a big batch's rows: a CSV of N VBench prompts (the longer list), a manifest and a
// jobs journal in which a share of the rows finished (a re-run: every page looks up earlier outcomes),
// then every page read through the readRows activity as the batch reads them (100 rows, 512 KiB at most), each
// page's rows then recorded as the batch records them (a journal line and a manifest line each), in a child
// process whose peak RSS and heap are sampled after each page. Prints one JSON line.
//   npx tsx bench/rows-memory.ts [rows=100000] [finished=0.5]   (finished: the share of rows an earlier run did)
import { spawnSync } from 'node:child_process';
import { appendFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRowActivities } from '../src/activities/rows';
import { MAX_PAGE_BYTES, type PromptRow } from '../src/contract/rows';
import { loadCsv } from '../src/input/csv';
import { rowsFileKey, writeRowsFile } from '../src/input/rows-file';
import { LocalStore } from '../src/store/local-store';
import { succeeded } from './results';
import { writeVbenchCsv } from './vbench';

const BATCH = 'batch-00000000000000be';
const PAGE = 100;

/** A journal line and a manifest line for each row, as a batch writes them when its rows succeed. */
async function record(dir: string, rows: PromptRow[]) {
  const at = new Date(0).toISOString();
  const journal = rows.map((r) =>
    JSON.stringify({
      rowId: r.id,
      jobId: `vid_${r.id}`,
      generation: 0,
      request: r.request,
      line: r.line,
      at,
    }),
  );
  await appendFile(join(dir, 'jobs.jsonl'), journal.join('\n') + '\n');
  const manifest = rows.map((r) => JSON.stringify(succeeded(r, at)));
  await appendFile(join(dir, 'manifest.jsonl'), manifest.join('\n') + '\n');
}

async function prepare(rows: number, finished: number) {
  const dir = await mkdtemp(join(tmpdir(), 'vidbatch-rows-bench-'));
  const csvPath = join(dir, 'big.csv');
  await writeVbenchCsv(csvPath, rows, 'all_dimension_longer');
  const csv = await loadCsv(csvPath);
  const own = join(dir, 'out', BATCH);
  await mkdir(own, { recursive: true });
  await record(own, csv.rows.slice(0, Math.round(rows * finished)));
  // What `run` does before the batch starts.
  await writeRowsFile(new LocalStore(join(dir, 'out')), rowsFileKey(csv.sha256), csv.sha256, csv.rows);
  return { dir, csvPath, sha256: csv.sha256 };
}

async function read(dir: string, csvPath: string, csvSha256: string, rows: number) {
  const activities = createRowActivities(join(dir, 'out'));
  let peakRss = 0;
  let peakHeap = 0;
  const started = performance.now();
  let offset = 0;
  let pages = 0;
  while (offset < rows) {
    const page = await activities.readRows({
      csvPath,
      csvSha256,
      offset,
      limit: PAGE,
      batchId: BATCH,
      maxBytes: MAX_PAGE_BYTES,
    });
    offset += page.length;
    await record(
      join(dir, 'out', BATCH),
      page.filter((r) => r.prior?.status !== 'succeeded'),
    );
    pages += 1;
    const m = process.memoryUsage();
    peakRss = Math.max(peakRss, m.rss);
    peakHeap = Math.max(peakHeap, m.heapUsed);
  }
  const seconds = (performance.now() - started) / 1000;
  return {
    rows,
    pages,
    seconds: Number(seconds.toFixed(1)),
    msPerPage: Number(((seconds * 1000) / pages).toFixed(1)),
    peakRssMB: Math.round(peakRss / 2 ** 20),
    peakHeapMB: Math.round(peakHeap / 2 ** 20),
  };
}

const [mode, ...args] = process.argv.slice(2);
if (mode === 'read') {
  const [dir, csvPath, sha, rows] = args;
  console.log(JSON.stringify(await read(dir!, csvPath!, sha!, Number(rows))));
} else {
  const rows = Number(mode ?? 100_000);
  const { dir, csvPath, sha256 } = await prepare(rows, Number(args[0] ?? 0.5));
  const child = spawnSync(
    process.execPath,
    [...process.execArgv, fileURLToPath(import.meta.url), 'read', dir, csvPath, sha256, String(rows)],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  await rm(dir, { recursive: true, force: true });
  process.exit(child.status ?? 1);
}
