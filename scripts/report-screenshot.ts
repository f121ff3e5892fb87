// The docs' screenshot of a batch report: opens a report.html in headless Chromium and saves a PNG of its top
// (counts, spend, the chart, the first failure classes).
//   npx tsx scripts/report-screenshot.ts out/<batch-id>/report.html docs/img/report.png
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const [target, png = 'docs/img/report.png'] = process.argv.slice(2);
if (!target) {
  console.error('usage: report-screenshot.ts <report.html> [out.png]');
  process.exit(2);
}
const url = pathToFileURL(resolve(target)).href;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  args: ['--no-sandbox'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1160, height: 1240 } });
  await page.goto(url);
  await page.waitForSelector('svg#timeline');
  await page.screenshot({ path: png });
  console.log(`screenshot of ${url}: ${png}`);
} finally {
  await browser.close();
}
