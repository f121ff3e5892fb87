// How fast the review gallery opens for a big batch: a synthetic 10,000-row CSV and manifest (most rows
// succeeded, some failed, some not finished), the page written as `vidbatch review` writes it, then opened in
// headless Chromium from the file system; prints the time from navigation to the first cards rendered.
//   npx tsx bench/review-load.ts [rows=10000] [runs=5]
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import type { PromptResult } from '../src/contract/prompt';
import { parseCsv } from '../src/input/csv';
import { csvCells } from '../src/review/csv-cells';
import { buildReviewData } from '../src/review/data';
import { reviewPage } from '../src/review/page';
import { succeeded } from './results';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const rows = Number(process.argv[2] ?? 10_000);
const runs = Number(process.argv[3] ?? 5);

const dir = await mkdtemp(join(tmpdir(), 'vidbatch-review-bench-'));
const words = ['a red fox', 'in the snow', 'at dusk', 'slow motion', 'aerial view', 'over a city', 'rain'];
const lines = ['id,prompt,model,resolution,duration'];
for (let i = 1; i <= rows; i++)
  lines.push(
    `r${i},"${words[i % 7]} ${words[(i * 3) % 7]} ${words[(i * 5) % 7]}, take ${i}",model-${i % 3},720P,5`,
  );
const text = lines.join('\n') + '\n';
const csvPath = join(dir, 'big.csv');
await writeFile(csvPath, text);
const parsed = parseCsv(text, csvPath);
const manifest: PromptResult[] = parsed.rows
  .filter((_, i) => i % 10 !== 9) // every tenth row not finished yet
  .map((r, i) => ({
    ...succeeded(r, new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString()),
    ...(i % 20 === 7
      ? { status: 'failed', errorCode: 'content_policy', errorMessage: 'refused', url: undefined }
      : {}),
    polls: 3,
  }));
const data = buildReviewData(
  { batchId: 'batch-bench', rows: parsed.rows, csv: csvCells(text), manifest, journal: [] },
  { pageDir: dir },
);
const page = join(dir, 'review.html');
await writeFile(page, await reviewPage(data));
const bytes = (await stat(page)).size;

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
const times: number[] = [];
try {
  for (let i = 0; i < runs; i++) {
    const context = await browser.newContext();
    const tab = await context.newPage();
    const started = performance.now();
    await tab.goto(pathToFileURL(page).href);
    await tab.waitForSelector('body[data-ready="true"] .card');
    times.push(performance.now() - started);
    await context.close();
  }
} finally {
  await browser.close();
  await rm(dir, { recursive: true, force: true });
}
times.sort((a, b) => a - b);
console.log(
  `review.html for ${rows} rows (${(bytes / 1e6).toFixed(1)} MB): navigation to first cards rendered ` +
    `median ${times[Math.floor(times.length / 2)]!.toFixed(0)} ms, min ${times[0]!.toFixed(0)} ms, max ${times[times.length - 1]!.toFixed(0)} ms over ${runs} runs`,
);
