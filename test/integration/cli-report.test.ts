// `vidbatch report`, end to end: real batches (spawned `vidbatch run` against this test's Temporal server,
// worker and a simulator that caps running jobs, refuses one prompt's content and forgets another's job; one
// row reused from an earlier batch), then the spawned `vidbatch report`: its output, `--json`, the page
// opened in headless Chromium (counts, the chart's lines, each failure class with its retry command, escaped
// prompts, a row link that opens its card in the gallery), and the same report with no Temporal to ask (a closed
// port; a copy of the output root Temporal never saw). Without Chromium the browser part is skipped with one
// line saying what to install (a failure in CI).
import { cp, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReportData } from '../../src/report/report-types';
import { requireChromium } from '../requirements';
import { exitAndOutput, FAST_POLL_FLAGS, vidbatch, vidbatchIn, type CliRun } from './cli-helpers';
import { testEnv, type TestEnv } from './helpers';

const CHROMIUM = requireChromium();

// Row `bad` (refused for its content) is user text that would break a page built carelessly from strings.
const TRICKY = 'a "forbidden" fox </script><img src=x onerror="window.pwned=1">, at dusk';
const CSV = [
  'id,prompt',
  'heron,a heron in reeds',
  'lake,a calm lake at dawn',
  'fox,a fox cub in snow',
  'kite,a red kite over green hills',
  'owl,a snowy owl on a fence',
  `bad,"${TRICKY.replace(/"/g, '""')}"`,
  'gone,a vanishing lighthouse',
].join('\n');

let env: TestEnv;
let batchOne: string;
let batchId: string;
let simulator429s: number;

/** A port nothing listens on: a Temporal address that answers nobody. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const reportPath = (r: CliRun) => /^Report: (.+\.html)$/m.exec(r.stdout)?.[1];

beforeAll(async () => {
  // At most 2 running jobs per key: the batch's 4 in flight meet 429s on submit.
  env = await testEnv({
    jobSeconds: 0.4,
    jobJitterSeconds: 0.1,
    maxRunningJobs: 2,
    faults: { moderationWords: ['forbidden'], goneWords: ['vanishing'] },
  });
  await env.startWorker();
  await writeFile(join(env.dir, 'one.csv'), 'id,prompt\no1,a heron in reeds\n');
  const first = await vidbatchIn(env, ['run', 'one.csv', ...FAST_POLL_FLAGS]);
  expect(first.code, exitAndOutput(first)).toBe(0);
  batchOne = /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(first.stdout)![1]!;
  const rateLimitedBefore = env.sim.stats().rateLimited;

  await writeFile(join(env.dir, 'r.csv'), CSV + '\n');
  const run = await vidbatchIn(env, ['run', 'r.csv', '--concurrency', '4', ...FAST_POLL_FLAGS]);
  expect(run.code, exitAndOutput(run)).toBe(3); // two rows failed
  expect(run.stdout).toMatch(/5 succeeded, 2 failed of 7/);
  batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(run.stdout)![1]!;
  simulator429s = env.sim.stats().rateLimited - rateLimitedBefore;
  console.log(`report batch: ${simulator429s} submits answered 429 by the simulator`);
}, 180_000);

afterAll(async () => {
  await env?.close();
});

describe('vidbatch report', () => {
  it('writes the page next to the manifest, prints its path, and --json gives the same facts', async () => {
    const report = await vidbatchIn(env, ['report', 'r.csv']);
    expect(report.code, exitAndOutput(report)).toBe(0);
    const file = join(env.dir, 'out', batchId, 'report.html');
    expect(reportPath(report)).toBe(file);
    expect(report.stdout).toContain(`${batchId}: 5 succeeded, 2 failed of 7 rows (1 reused)`);
    expect(report.stdout).toContain(`vidbatch retry-failed ${batchId} --code content_moderation`);
    expect(report.stdout).toContain(`vidbatch retry-failed ${batchId} --code job_gone`);
    const html = await readFile(file, 'utf8');
    expect(html).not.toMatch(/<script|<link|src="http/i); // self-contained, nothing runs

    const json = await vidbatchIn(env, ['report', batchId, '--json']);
    expect(json.code, exitAndOutput(json)).toBe(0);
    const data = JSON.parse(json.stdout) as ReportData & { page: string };
    expect(data.page).toBe(file);
    expect(data.counts).toMatchObject({ rows: 7, succeeded: 5, failed: 2, reused: 1, noOutcome: 0 });
    expect(data.failures.map((f) => [f.code, f.rows.map((r) => r.rowId)])).toEqual(
      expect.arrayContaining([
        ['content_moderation', ['bad']],
        ['job_gone', ['gone']],
      ]),
    );
    expect(data.reused).toEqual([
      expect.objectContaining({ rowId: 'heron', fromBatch: batchOne, fromRow: 'o1' }),
    ]);
    // The jobs the simulator made for this batch (the heron's was the first batch's).
    expect(data.ledger.jobsMade).toBe(env.sim.stats().jobsCreated - 1);
    // Every 429 the simulator gave a submit of this batch is a submit sent again in the rows' attempts.
    expect(simulator429s).toBeGreaterThan(0);
    expect(data.counts.submitRetries).toBe(simulator429s);
    expect(data.timeline.retries.at(-1)).toBe(simulator429s);
    expect(Math.max(...data.timeline.inFlight)).toBeGreaterThanOrEqual(2);
    expect(data.timeline.succeeded.at(-1)).toBe(5);
  });

  it('needs no Temporal: a closed server port, or an output root the server never saw', async () => {
    const port = await closedPort();
    const started = Date.now();
    const offline = await vidbatch(['report', batchId.slice(0, 14), '--json'], {
      cwd: env.dir,
      env: { TEMPORAL_ADDRESS: `127.0.0.1:${port}` },
    });
    expect(offline.code, exitAndOutput(offline)).toBe(0);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect((JSON.parse(offline.stdout) as ReportData).counts).toMatchObject({ succeeded: 5, failed: 2 });

    // A copy of the output root in a folder no vidbatch ran in, no TEMPORAL_ADDRESS: nothing is started.
    const elsewhere = await mkdtemp(join(tmpdir(), 'vidbatch-report-copy-'));
    await cp(join(env.dir, 'out'), join(elsewhere, 'kept'), { recursive: true });
    await cp(join(env.dir, 'r.csv'), join(elsewhere, 'r.csv'));
    const copy = await vidbatch(['report', 'r.csv', '--out-root', 'kept', '--out', 'morning.html'], {
      cwd: elsewhere,
    });
    expect(copy.code, exitAndOutput(copy)).toBe(0);
    expect(reportPath(copy)).toBe(join(elsewhere, 'morning.html'));
    expect(existsSync(join(elsewhere, '.vidbatch', 'temporal.db'))).toBe(false);
    // Links into the gallery are relative to where the page went; printed commands carry the root given.
    const html = await readFile(join(elsewhere, 'morning.html'), 'utf8');
    expect(html).toContain(`href="kept/${batchId}/review.html#row=bad"`);
    expect(html).toContain(`vidbatch retry-failed ${batchId} --code job_gone --out-root kept`);

    const missing = await vidbatch(['report', 'batch-0000'], { cwd: elsewhere });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/neither a batch id .* nor a CSV file/);
  });

  it.skipIf(!CHROMIUM)(
    'opens in Chromium offline: counts, the chart, failure classes with retry commands, links into the gallery',
    async () => {
      // The gallery first, so the report links to a page that is there.
      const review = await vidbatchIn(env, ['review', batchId]);
      expect(review.code, exitAndOutput(review)).toBe(0);
      const report = await vidbatchIn(env, ['report', batchId]);
      expect(report.code, exitAndOutput(report)).toBe(0);
      const file = reportPath(report)!;

      const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
      try {
        const page = await browser.newPage();
        const requests: string[] = [];
        page.on('request', (r) => requests.push(r.url()));
        await page.goto(pathToFileURL(file).href);
        const count = (key: string) => page.textContent(`[data-count="${key}"] dd`);
        expect(await count('rows')).toBe('7');
        expect(await count('succeeded')).toBe('5');
        expect(await count('failed')).toBe('2');
        expect(await count('reused')).toBe('1');
        expect(await count('submit-retries')).toBe(String(simulator429s));
        expect(await page.textContent('#ledger')).toContain(
          `jobs made: ${env.sim.stats().jobsCreated - 1} for 7 rows`,
        );

        // The chart: an SVG with a step line of several points per series, drawn on screen.
        const lines = await page.$$eval('svg#timeline polyline', (els) =>
          els.map((e) => {
            const el = e as unknown as {
              getAttribute(n: string): string | null;
              getBoundingClientRect(): { width: number };
            };
            return [
              el.getAttribute('data-series'),
              el.getAttribute('points')!.trim().split(/\s+/).length,
              el.getBoundingClientRect().width,
            ];
          }),
        );
        expect(lines.map(([series]) => series)).toEqual(['succeeded', 'failed', 'inFlight', 'retries']);
        for (const [series, points, width] of lines) {
          expect(points, String(series)).toBeGreaterThan(3);
          expect(width, String(series)).toBeGreaterThan(100);
        }

        // Each failure class, visible, with its rows and the command that retries it.
        for (const [code, row] of [
          ['content_moderation', 'bad'],
          ['job_gone', 'gone'],
        ]) {
          const cls = `article.failure[data-code="${code}"]`;
          expect(await page.isVisible(cls)).toBe(true);
          expect(await page.textContent(`${cls} code.retry`)).toBe(
            `vidbatch retry-failed ${batchId} --code ${code}`,
          );
          expect(await page.isVisible(`${cls} tr[data-row="${row}"]`)).toBe(true);
        }
        expect(await page.textContent('#reused')).toContain(batchOne);
        // User text is text: nothing in the prompt ran or became an element.
        expect(await page.textContent('tr[data-row="bad"] td.prompt')).toBe(TRICKY);
        expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
        expect(await page.$$('img, script')).toHaveLength(0);
        // Nothing but the file itself was fetched.
        expect(requests.filter((u) => !u.startsWith('file:'))).toEqual([]);

        // A failed row's link opens the gallery at its card.
        await page.click(`article.failure[data-code="content_moderation"] a.row-link`);
        await page.waitForSelector('body[data-ready="true"]');
        expect(page.url()).toContain('review.html#row=bad');
        expect(await page.getAttribute('.card.selected', 'data-id')).toBe('bad');
      } finally {
        await browser.close();
      }
    },
  );
});
