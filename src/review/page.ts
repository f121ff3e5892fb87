// review.html: one self-contained page (inline CSS and JS, no network but the videos), so it works offline
// from the file system. The script and style live in page-cards.js, page-script.js and page-style.css next to
// this file (not page.js: an import of './page' would resolve to it); the data is embedded as JSON in a
// non-executed script element, escaped so no user text can close it.
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ReviewData } from './data';

/** The gallery's file name in a batch's page folder (`vidbatch review`; the report links into it). */
export const REVIEW_FILE = 'review.html';

// A path, not `new URL('./…', import.meta.url)`: bundlers and Vite would turn that into an import of the file.
const HERE = dirname(fileURLToPath(import.meta.url));
const asset = (name: string) => readFile(join(HERE, name), 'utf8');

/** JSON safe inside <script>: `<` escaped (no `</script>`, no `<!--`), and the two JS-hostile line separators. */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export interface PageOptions {
  /** `review --serve`: the page polls `data.json` for rows that finish. */
  live?: boolean;
}

export async function reviewPage(data: ReviewData, options: PageOptions = {}): Promise<string> {
  const [cards = '', main = '', css = ''] = await Promise.all(
    ['page-cards.js', 'page-script.js', 'page-style.css'].map(asset),
  );
  const js = `${cards}\n${main}`; // the cards first: the main script uses them
  if (/<\/script/i.test(js) || /<\/style/i.test(css)) throw new Error('a page asset closes its own tag');
  // Only the videos come from elsewhere: the downloaded files, the provider's URLs, or the review server.
  const csp = [
    "default-src 'none'",
    "script-src 'unsafe-inline'",
    "style-src 'unsafe-inline'",
    'media-src * file: blob: data:',
    "connect-src 'self'",
    'img-src data: blob:',
  ].join('; ');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<title>Review ${escapeHtml(data.batchId)}</title>
<style>
${css}
</style>
</head>
<body data-live="${options.live ? 'true' : 'false'}">
<header>
  <h1>Review <span id="batch-id"></span></h1>
  <p id="summary"></p>
  <p id="meta"></p>
  <form id="controls">
    <label>State <select id="f-state"></select></label>
    <label>Model <select id="f-model"></select></label>
    <label>Flag <select id="f-flag"></select></label>
    <label>Search <input id="f-search" type="search" placeholder="prompt text" autocomplete="off"></label>
    <label>Sort <select id="f-sort">
      <option value="line">line</option><option value="state">state</option><option value="cost">cost</option>
    </select></label>
    <button type="button" id="export-redo">Export redo</button>
    <button type="button" id="export-kept">Export kept</button>
  </form>
  <p id="pager"><button type="button" id="prev">&larr; Previous</button> <span id="page-info"></span>
    <button type="button" id="next">Next &rarr;</button> <span id="message" role="status"></span></p>
  <p class="help">Keys: arrows move, <kbd>k</kbd> keep, <kbd>r</kbd> redo (again to clear). Marks stay in this browser.</p>
</header>
<main id="cards"></main>
<script id="review-data" type="application/json">${scriptJson(data)}</script>
<script>
${js}
</script>
</body>
</html>
`;
}
