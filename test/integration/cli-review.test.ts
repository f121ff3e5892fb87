// `vidbatch review`, end to end: a real batch (spawned `vidbatch run --download` against this test's Temporal
// server, worker and simulator), then the spawned `vidbatch review`, and the page it writes opened in Debian's
// headless Chromium: cards, filters, search, a video, keyboard marks, the redo export (validated and run again
// as a new batch); `review --serve`: the page, data.json, a range request for a video, cards that update as
// rows finish during a run. Without Chromium: skipped with one line saying what to install (a failure in CI).
import { existsSync } from 'node:fs';
import { get } from 'node:http';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseCsv } from '../../src/input/csv';
import { readManifest } from '../../src/results/manifest';
import { simulatedRewrite } from '../../src/simulator/chat-route';
import { requireChromium } from '../requirements';
import { background, vidbatch, type CliRun } from './cli-helpers';
import { testEnv, type TestEnv } from './helpers';

const CHROMIUM = requireChromium();
const FAST = ['--first-poll', '0.3', '--poll-interval', '0.2', '--poll-cap', '1', '--no-adaptive-poll'];

let env: TestEnv | undefined;
let browser: Browser;
beforeAll(async () => {
  if (CHROMIUM) browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
});
afterAll(async () => {
  await browser?.close();
});
afterEach(async () => {
  await env?.close();
  env = undefined;
});

function cli(e: TestEnv, args: string[]): Promise<CliRun> {
  return vidbatch(args, { cwd: e.dir, env: cliSettings(e) });
}
function cliSettings(e: TestEnv): Record<string, string> {
  return {
    TEMPORAL_ADDRESS: e.address,
    VIDBATCH_TASK_QUEUE: e.taskQueue,
    GATEWAY_BASE_URL: e.sim.baseUrl,
    GATEWAY_API_KEY: e.sim.apiKey,
  };
}

// Row 3 is user text that would break a page built with HTML strings, and a CSV written naively.
const TRICKY = 'a "quoted" fox </script><img src=x onerror="window.pwned=1">, at dusk\nsecond line';
const CSV = [
  'id,prompt,resolution',
  'lake,a calm lake at dawn for review,720P',
  'bad,a forbidden scene,720P',
  `fox,"${TRICKY.replace(/"/g, '""')}",1080P`,
  'kite,a red kite over green hills,720P',
].join('\n');

/** The video element's fields the test reads (the tests compile without the DOM library). */
interface VideoLike {
  src: string;
  readyState: number;
  duration: number;
  error: { code: number } | null;
  addEventListener(type: string, listener: () => void): void;
}

const cardIds = (page: Page): Promise<(string | null)[]> =>
  page.$$eval('.card', (cards) =>
    cards.map((c) => (c as unknown as { getAttribute(name: string): string | null }).getAttribute('data-id')),
  );

async function openPage(url: string): Promise<Page> {
  const context = await browser.newContext({ acceptDownloads: true });
  const page = await context.newPage();
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]');
  return page;
}

describe.skipIf(!CHROMIUM)('vidbatch review', () => {
  it('writes a gallery of a finished batch that filters, plays, marks and exports rows to run again', async () => {
    env = await testEnv({
      jobSeconds: 0.3,
      jobJitterSeconds: 0.1,
      faults: { moderationWords: ['forbidden'] },
    });
    await env.startWorker();
    await writeFile(join(env.dir, 'g.csv'), CSV + '\n');
    const run = await cli(env, ['run', 'g.csv', '--download', 'videos', ...FAST]);
    expect(run.code).toBe(3); // the moderated row failed
    expect(run.stdout).toMatch(/3 succeeded, 1 failed of 4/);
    const batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(run.stdout)![1]!;
    expect(run.stderr).toContain(`npx vidbatch review ${batchId}`);

    // With the user's price (per second; the rows ask for the spec's default 5 s): the ledger and costs show.
    const review = await cli(env, ['review', 'g.csv', '--price', '*=0.10']);
    expect(review.code, review.stderr).toBe(0);
    const file = /(\S+review\.html)/.exec(review.stdout)?.[1];
    expect(file).toBe(join(env.dir, 'out', batchId, 'review.html'));
    expect(existsSync(file!)).toBe(true);
    const html = await readFile(file!, 'utf8');
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=/); // self-contained

    // By batch id: the CSV the batch was started with.
    const byId = await cli(env, ['review', batchId, '--price', '*=0.10']);
    expect(byId.code, byId.stderr).toBe(0);
    expect(byId.stdout).toContain(`4 rows: ${file}`);

    const page = await openPage(pathToFileURL(file!).href);
    expect(await cardIds(page)).toEqual(['lake', 'bad', 'fox', 'kite']);
    expect(await page.textContent('#summary')).toContain('4 rows: 3 succeeded, 1 failed');
    // The spend ledger counts what the simulator made, whatever became of it, and each card has its cost.
    const jobsMade = env.sim.stats().jobsCreated;
    expect(await page.textContent('#meta')).toContain(`jobs made: ${jobsMade} for 4 rows`);
    expect(await page.textContent('#summary')).toContain(`estimated spend ${(jobsMade * 0.5).toFixed(2)}`);
    expect(await page.textContent('.card[data-id="lake"]')).toContain('0.50 (estimated)');
    // Every downloaded video was checked against its row (real clips of the asked resolution and duration).
    expect(await page.textContent('.card[data-id="lake"]')).toContain('verified');
    // User text is text: the prompt shows as written, nothing in it ran or became an element.
    expect(await page.textContent('.card[data-id="fox"] .prompt')).toBe(TRICKY);
    expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
    expect(await page.$$('img')).toHaveLength(0);
    const bad = await page.textContent('.card[data-id="bad"]');
    expect(bad).toContain('content_moderation');

    // Filters and search change what is shown.
    await page.selectOption('#f-state', 'failed');
    expect(await cardIds(page)).toEqual(['bad']);
    await page.selectOption('#f-state', '');
    await page.fill('#f-search', 'KITE');
    expect(await cardIds(page)).toEqual(['kite']);
    await page.fill('#f-search', '');
    expect(await cardIds(page)).toHaveLength(4);

    // The video: the downloaded file, linked relative to the page, loaded once its card is on screen.
    const manifest = await readManifest(join(env.dir, 'out', batchId, 'manifest.jsonl'));
    const lake = manifest.find((r) => r.rowId === 'lake')!;
    expect(lake.file).toBeTruthy();
    const video = await page.waitForSelector('.card[data-id="lake"] video[src]');
    const src = await video.evaluate((v) => (v as unknown as VideoLike).src);
    expect(decodeURIComponent(new URL(src).pathname)).toBe(lake.file);
    expect(new URL(src).hash).toBe('#t=0.1');
    // The simulator serves a real H.264 clip of the asked duration: it plays, and says how long it is.
    const loaded = await video.evaluate(
      (element) =>
        new Promise<number | string>((resolve) => {
          const v = element as unknown as VideoLike;
          if (v.readyState >= 1) resolve(v.duration);
          if (v.error) resolve(`error ${v.error.code}`);
          v.addEventListener('loadedmetadata', () => resolve(v.duration));
          v.addEventListener('error', () => resolve(`error ${v.error?.code}`));
          setTimeout(() => resolve('timeout'), 30_000);
        }),
    );
    expect(loaded).toBeCloseTo(5, 0); // duration 5 s

    // Keyboard: arrows move, r marks redo, k marks keep; marks survive a reload (localStorage).
    await page.click('.card[data-id="lake"] .prompt');
    await page.keyboard.press('k');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('r');
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    expect(await page.getAttribute('.card[data-id="fox"]', 'class')).toContain('mark-redo');
    expect(await page.getAttribute('.card[data-id="lake"]', 'class')).toContain('mark-keep');
    await page.selectOption('#f-flag', 'redo');
    expect(await cardIds(page)).toEqual(['fox']);

    // Export redo: the input format, same columns and id; valid, and `run` makes a new batch of it.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-redo')]);
    const redo = join(env.dir, 'redo.csv');
    await download.saveAs(redo);
    const parsed = parseCsv(await readFile(redo), redo);
    expect(parsed.problems).toEqual([]);
    expect(parsed.rows.map((r) => [r.id, r.prompt, r.parameters.resolution])).toEqual([
      ['fox', TRICKY, '1080P'],
    ]);
    // A new take of the same request: the output root's request index does not hand back the rejected video.
    expect(parsed.rows[0]!.take).toMatch(/^redo-\d{14}$/);
    const validate = await cli(env, ['validate', 'redo.csv']);
    expect(validate.code).toBe(0);
    expect(validate.stdout).toContain('1 rows, no problems');
    const [kept] = await Promise.all([page.waitForEvent('download'), page.click('#export-kept')]);
    await kept.saveAs(join(env.dir, 'kept.csv'));
    expect((await readFile(join(env.dir, 'kept.csv'), 'utf8')).trim().split('\n')).toEqual([
      'id,prompt,resolution',
      'lake,a calm lake at dawn for review,720P',
    ]);
    const jobsBefore = env.sim.stats().jobsCreated;
    const again = await cli(env, ['run', 'redo.csv', ...FAST]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/1 succeeded, 0 failed of 1/);
    expect(again.stdout).not.toContain(batchId);
    expect(env.sim.stats().jobsCreated).toBe(jobsBefore + 1);
    await page.context().close();
  });

  it('shows the rows another batch paid for: a reused badge, the batch and row they came from', async () => {
    env = await testEnv({ jobSeconds: 0.5, jobJitterSeconds: 0 });
    await env.startWorker();
    await writeFile(join(env.dir, 'one.csv'), 'id,prompt\no1,a heron in reeds\no2,a snowy owl\n');
    const first = await cli(env, ['run', 'one.csv', ...FAST]);
    expect(first.code, first.stderr).toBe(0);
    const batchOne = /(batch-[0-9a-f]{16}-[0-9a-f]{8}):/.exec(first.stdout)![1]!;
    await writeFile(
      join(env.dir, 'two.csv'),
      'id,prompt\nt1,a snowy owl\nt2,a heron in reeds\nt3,a fox cub\n',
    );
    const second = await cli(env, ['run', 'two.csv', ...FAST]);
    expect(second.code, second.stderr).toBe(0);
    expect(env.sim.stats().jobsCreated).toBe(3);
    const review = await cli(env, ['review', 'two.csv']);
    expect(review.code, review.stderr).toBe(0);
    const page = await openPage(pathToFileURL(/(\S+review\.html)/.exec(review.stdout)![1]!).href);
    expect(await page.textContent('#summary')).toContain(`3 rows: 3 succeeded · 2 reused from ${batchOne}`);
    expect(await page.textContent('.card[data-id="t1"]')).toContain(`reused from${batchOne} row o2`);
    expect(await page.textContent('.card[data-id="t3"]')).not.toContain('reused');
    await page.context().close();
  });

  it('shows a rewritten prompt beside the one the user wrote (run --enhance)', async () => {
    env = await testEnv({ jobSeconds: 0.3, jobJitterSeconds: 0 });
    await env.startWorker();
    await writeFile(join(env.dir, 'e.csv'), 'id,prompt\ne1,a paper boat in a gutter\ne2,a snail on a leaf\n');
    const run = await cli(env, ['run', 'e.csv', '--enhance', ...FAST]);
    expect(run.code, run.stderr).toBe(0);
    console.log(
      `gallery with both prompts: ${env.sim.stats().chatCallsTotal} chat calls, ${env.sim.stats().jobsCreated} jobs (simulator's counts)`,
    );
    expect(env.sim.stats().chatCallsTotal).toBe(2);
    expect(env.sim.stats().jobsCreated).toBe(2);
    const review = await cli(env, ['review', 'e.csv']);
    expect(review.code, review.stderr).toBe(0);
    const page = await openPage(pathToFileURL(/(\S+review\.html)/.exec(review.stdout)![1]!).href);
    expect(await page.textContent('.card[data-id="e1"] .prompt.original')).toBe('a paper boat in a gutter');
    expect(await page.textContent('.card[data-id="e1"] .prompt.sent')).toBe(
      simulatedRewrite('a paper boat in a gutter'),
    );
    expect(await page.textContent('.card[data-id="e2"] .prompts')).toContain('sent (rewritten)');
    // Side by side: the two prompts start on the same line.
    const tops = await page.$$eval('.card[data-id="e1"] .prompts > div', (sides) =>
      sides.map(
        (d) => (d as unknown as { getBoundingClientRect(): { top: number } }).getBoundingClientRect().top,
      ),
    );
    expect(tops).toHaveLength(2);
    expect(tops[0]).toBe(tops[1]);
    await page.context().close();
  });

  it('--serve serves the page, data.json and the videos (range requests), and cards update as rows finish', async () => {
    env = await testEnv({ jobSeconds: 1.5, jobJitterSeconds: 0 });
    await env.startWorker();
    await writeFile(join(env.dir, 's.csv'), 'id,prompt\ns1,a lighthouse in fog\ns2,a tram at night\n');
    // Started before the batch: every card waits, then fills in as the run records rows.
    const served = background(['review', 's.csv', '--serve', '--port', '0'], {
      cwd: env.dir,
      env: cliSettings(env),
    });
    try {
      const url = (await served.waitFor(/at (http:\/\/127\.0\.0\.1:\d+\/)/))[1]!;
      const page = await openPage(url);
      expect(await cardIds(page)).toEqual(['s1', 's2']);
      expect(await page.textContent('#summary')).toContain('2 rows: 2 waiting');

      const run = await cli(env, ['run', 's.csv', '--download', 'videos', '--concurrency', '1', ...FAST]);
      expect(run.code, run.stderr).toBe(0);
      await page.waitForSelector('.card[data-id="s2"][data-state="succeeded"] video', { timeout: 30_000 });
      expect(await page.textContent('#summary')).toContain('2 rows: 2 succeeded');

      const answer = await fetch(`${url}data.json`);
      const data = (await answer.json()) as { tag: string; rows: { id: string; state: string }[] };
      // A page holding this version is told nothing changed.
      expect((await fetch(`${url}data.json?since=${data.tag}`)).status).toBe(304);
      expect(data.rows.map((r) => [r.id, r.state])).toEqual([
        ['s1', 'succeeded'],
        ['s2', 'succeeded'],
      ]);
      const batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(run.stdout)![1]!;
      const file = (await readManifest(join(env.dir, 'out', batchId, 'manifest.jsonl'))).find(
        (r) => r.rowId === 's1',
      )!.file!;
      const bytes = await readFile(file);
      const ranged = await fetch(`${url}video/s1`, { headers: { range: 'bytes=4-11' } });
      expect(ranged.status).toBe(206);
      expect(ranged.headers.get('content-range')).toBe(`bytes 4-11/${bytes.length}`);
      expect(Buffer.from(await ranged.arrayBuffer())).toEqual(bytes.subarray(4, 12));
      const whole = await fetch(`${url}video/s1`);
      expect(whole.status).toBe(200);
      expect(Buffer.from(await whole.arrayBuffer())).toEqual(bytes);
      expect((await fetch(`${url}video/..%2Fs.csv`)).status).toBe(404);
      // A page that rebinds its own name to 127.0.0.1 is refused (DNS rebinding).
      const rebound = await new Promise<number | undefined>((resolve, reject) =>
        get(`${url}data.json`, { headers: { host: 'rebind.example' } }, (r) => {
          r.resume();
          resolve(r.statusCode);
        }).on('error', reject),
      );
      expect(rebound).toBe(403);
      await page.context().close();
    } finally {
      const stopped = await served.stop();
      expect(stopped.code).toBe(0);
    }
  });
});
