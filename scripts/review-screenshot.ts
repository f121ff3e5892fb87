// The README's screenshot of the review gallery: opens a review.html (or a `review --serve` URL) in headless
// Chromium, marks the first card keep and the third redo with the keyboard, waits for the visible videos,
// and saves a PNG of the window.
//   npx tsx scripts/review-screenshot.ts out/<batch-id>/review.html docs/img/review-gallery.png
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const [target, png = 'docs/img/review-gallery.png'] = process.argv.slice(2);
if (!target) {
  console.error('usage: review-screenshot.ts <review.html or URL> [out.png]');
  process.exit(2);
}
const url = /^https?:/.test(target) ? target : pathToFileURL(resolve(target)).href;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  args: ['--no-sandbox'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 820 } });
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"] .card');
  await page.click('.card .prompt');
  await page.keyboard.press('k');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('r');
  // Let the visible videos load their first frame (or give up on them).
  await page
    .waitForFunction(
      "[...document.querySelectorAll('video[src]')].every((v) => v.readyState >= 2 || v.error)",
      undefined,
      { timeout: 10_000 },
    )
    .catch(() => undefined);
  await page.screenshot({ path: png });
  console.log(`screenshot of ${url}: ${png}`);
} finally {
  await browser.close();
}
