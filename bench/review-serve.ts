// What `review --serve` costs for a big batch during its run: a CSV of N VBench prompts, a manifest in which
// half the rows finished, the server started on it; then the page's first data.json (every row), and, after
// 100 more rows finished, the page's next poll (the rows changed since its version). Prints one JSON line:
// each answer's time and size, and the server process's RSS.
//   npx tsx bench/review-serve.ts [rows=100000]
import { appendFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PromptRow } from '../src/contract/rows';
import { loadCsv } from '../src/input/csv';
import { serveReview } from '../src/review/serve';
import { succeeded } from './results';
import { writeVbenchCsv } from './vbench';

const rows = Number(process.argv[2] ?? 100_000);
const dir = await mkdtemp(join(tmpdir(), 'vidbatch-review-serve-'));
const csvPath = join(dir, 'big.csv');
await writeVbenchCsv(csvPath, rows);
const csv = await loadCsv(csvPath);
const outDir = join(dir, 'out', 'batch-00000000000000be');
await mkdir(outDir, { recursive: true });
const manifestPath = join(outDir, 'manifest.jsonl');
const at = new Date(0).toISOString();
const record = (done: PromptRow[]) =>
  appendFile(manifestPath, done.map((r) => JSON.stringify(succeeded(r, at))).join('\n') + '\n');
await record(csv.rows.slice(0, rows / 2));

const server = await serveReview(
  { batchId: 'batch-00000000000000be', outDir, pageDir: outDir, manifestPath, csvPath },
  0,
);
const get = async (path: string) => {
  const started = performance.now();
  const res = await fetch(new URL(path, server.url));
  const body = await res.text();
  return { status: res.status, ms: Math.round(performance.now() - started), bytes: body.length, body };
};
try {
  const first = await get('data.json');
  const tag = (JSON.parse(first.body) as { tag: string }).tag;
  await record(csv.rows.slice(rows / 2, rows / 2 + 100));
  // The page polls every 2 s; the server rebuilds once the last build is old enough.
  await new Promise((r) => setTimeout(r, Math.max(2000, first.ms * 5)));
  const next = await get(`data.json?since=${tag}`);
  const changed = (JSON.parse(next.body) as { rows: unknown[] }).rows.length;
  const idle = await get(`data.json?since=${(JSON.parse(next.body) as { tag: string }).tag}`);
  console.log(
    JSON.stringify({
      rows,
      firstMs: first.ms,
      firstMB: Number((first.bytes / 1e6).toFixed(1)),
      nextMs: next.ms,
      nextKB: Math.round(next.bytes / 1e3),
      nextRows: changed,
      idleStatus: idle.status,
      rssMB: Math.round(process.memoryUsage().rss / 2 ** 20),
    }),
  );
} finally {
  await server.close();
  await rm(dir, { recursive: true, force: true });
}
