// report.html: one self-contained page (inline style and SVG, no script, nothing fetched), so it opens from
// the file system offline and can be mailed or archived beside the batch. Built as an HTML string in which
// every piece of recorded text goes through escapeHtml; the page's policy forbids scripts altogether, so even
// a mistake there could not run one.
import { escapeHtml as h } from './html';
import { PANELS, timelineSvg } from './report-chart';
import type { FailureClass, ReportData, ReportRow } from './report-types';
import { REPORT_CSS } from './report-style';

/** Rows listed per table: the rest are named by count (all of them are in `--json` and the exports). */
export const MAX_LISTED = 100;

/** What the chart's series are made of, said on the page and in docs/downloads-and-review.md. */
export const SERIES_SOURCES = [
  'Rows finished: each row counted once, at the finishedAt of its last manifest line (its final state).',
  "Jobs in flight: each job from its jobs-journal entry (or its line's submittedAt) to the finishedAt of the line that reports it; a job no line reports ends with its row's next recorded outcome, or stays in flight to the chart's end.",
  "Submits sent again: the folder records no time of a 429. Each manifest line's attempts counts its row's submits, those refused with 429 included; attempts − 1 − unknownSubmits of them were sent again (429s, and attempts that never reached the gateway), counted when the row's submit went through (submittedAt, else finishedAt).",
];

/** "2026-05-01 21:04:05 UTC": recorded times as they are, not in the reader's zone. */
export function when(iso: string): string {
  return iso.replace('T', ' ').replace(/(\.\d+)?Z$/, ' UTC');
}

const plural = (n: number, word: string) => `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;

/** A link to the row's card in the gallery (review.html reads `#row=<id>`). */
function rowLink(galleryHref: string, rowId: string): string {
  return `<a class="row-link" href="${h(`${galleryHref}#row=${encodeURIComponent(rowId)}`)}">${h(rowId)}</a>`;
}

function more(total: number, what: string): string {
  return total > MAX_LISTED
    ? `<p class="note">and ${plural(total - MAX_LISTED, 'more row')} ${what} (all of them in <code>--json</code>)</p>`
    : '';
}

/** A table of rows: line, id (linked into the gallery), prompt, then the given columns. */
function rowTable<R extends ReportRow>(
  rows: R[],
  galleryHref: string,
  columns: [heading: string, cell: (r: R) => string, cls?: string][],
): string {
  const head = ['line', 'row', 'prompt', ...columns.map(([name]) => name)]
    .map((c) => `<th${c === 'line' ? ' class="num"' : ''}>${h(c)}</th>`)
    .join('');
  const body = rows
    .slice(0, MAX_LISTED)
    .map(
      (r) =>
        `<tr data-row="${h(r.rowId)}"><td class="num">${r.line}</td><td class="nowrap">${rowLink(galleryHref, r.rowId)}</td>` +
        `<td class="prompt">${h(r.prompt)}</td>${columns.map(([, cell, cls]) => `<td${cls ? ` class="${cls}"` : ''}>${cell(r)}</td>`).join('')}</tr>`,
    )
    .join('\n');
  return `<table><thead><tr>${head}</tr></thead><tbody>\n${body}\n</tbody></table>`;
}

function countTiles(d: ReportData): string {
  const c = d.counts;
  const tiles: [key: string, label: string, value: number, cls?: string][] = [
    ['rows', 'rows', c.rows],
    ['succeeded', 'succeeded', c.succeeded, 'ok'],
    ['failed', 'failed', c.failed, c.failed ? 'bad' : undefined],
    ['no-outcome', 'no outcome yet', c.noOutcome],
    ['reused', 'reused', c.reused],
    ['arrived-late', 'arrived late', c.arrivedLate],
    ['unknown-submits', 'unknown submit outcome', c.unknownSubmitRows],
    ['submit-retries', 'submits sent again', c.submitRetries],
  ];
  return `<dl class="tiles">${tiles
    .map(
      ([key, label, value, cls]) =>
        `<div data-count="${key}"${cls ? ` class="${cls}"` : ''}><dt>${h(label)}</dt><dd>${value.toLocaleString('en-US')}</dd></div>`,
    )
    .join('')}</dl>`;
}

function spend(d: ReportData): string {
  const l = d.ledger;
  const rows: [string, number][] = [
    ['jobs made', l.jobsMade],
    ['kept (a row succeeded with it)', l.kept],
    ['failed at the gateway', l.failedAtGateway],
    ['stopped at the provider (billed at most for what ran)', l.stopped ?? 0],
    ['abandoned (may still finish and be billed)', l.abandoned],
    ['pending (no outcome recorded yet)', l.pending],
    ['unknown submit outcomes (up to this many more jobs)', l.unknown],
    ['rows reusing jobs other batches paid for', l.reused],
  ];
  // With prices, the ledger line says the estimated cost; without, how to have it.
  const cost =
    l.estimatedCost === undefined
      ? '<p class="note">No prices given: <code>--price</code> or <code>--prices</code> adds the estimated cost.</p>'
      : '';
  const v = d.verification;
  const verified =
    v.ok + v.mismatched + v.notDownloaded
      ? `<p id="verification">Videos verified: ${v.ok} ok, ${v.mismatched} mismatched${v.notDownloaded ? `, ${v.notDownloaded} not downloaded (provider URL only)` : ''}.</p>`
      : '';
  return (
    `<p id="ledger">${h(d.ledgerLine)}</p>${cost}` +
    `<table class="ledger"><tbody>${rows.map(([k, n]) => `<tr><th>${h(k)}</th><td class="num">${n.toLocaleString('en-US')}</td></tr>`).join('')}</tbody></table>${verified}`
  );
}

function failureSection(f: FailureClass, galleryHref: string): string {
  const label = f.code ?? '(no error code)';
  return (
    `<article class="failure" data-code="${h(f.code ?? '')}">` +
    `<h3><code>${h(label)}</code> · ${plural(f.rows.length, 'row')}</h3>` +
    (f.caution
      ? `<p class="caution">Left out of a retry without <code>--code</code>: ${h(f.caution)}.</p>`
      : '') +
    `<p>Retry: <code class="command retry">${h(f.retryCommand)}</code></p>` +
    rowTable(f.rows, galleryHref, [
      ['message', (r) => h(r.errorMessage ?? '')],
      ['job', (r) => (r.jobId ? `<code>${h(r.jobId)}</code>` : ''), 'nowrap'],
    ]) +
    more(f.rows.length, 'of this class') +
    '</article>'
  );
}

export function reportPage(d: ReportData): string {
  const g = d.gallery;
  const t = d.timeline;
  const span = t.at.length
    ? ` · recorded from ${h(when(new Date(t.at[0]!).toISOString()))} to ${h(when(new Date(t.at.at(-1)!).toISOString()))}`
    : '';
  const gallery =
    `<a id="gallery-link" href="${h(g.href)}">Open the gallery</a>` +
    (g.exists
      ? ' (videos, prompts, keep or redo)'
      : ` (not written yet: <code class="command">${h(g.command)}</code> writes it)`);
  const legend = PANELS.flatMap((p) => p.lines)
    .map((l) => `<li><span class="${l.series}"></span>${h(l.label)}</li>`)
    .join('');
  const failures = d.failures.length
    ? d.failures.map((f) => failureSection(f, g.href)).join('\n')
    : '<p class="note">No row failed.</p>';
  const late = d.lateArrivals.length
    ? rowTable(d.lateArrivals, g.href, [
        ['had ended as', (r) => `<code>${h(r.endedAs)}</code> at ${h(when(r.endedAt))}`],
        ['video arrived', (r) => h(when(r.finishedAt))],
        ['job', (r) => (r.jobId ? `<code>${h(r.jobId)}</code>` : ''), 'nowrap'],
      ]) + more(d.lateArrivals.length, 'arrived late')
    : '<p class="note">No video arrived after its row had ended.</p>';
  const reused = d.reused.length
    ? rowTable(d.reused, g.href, [
        ['state', (r) => h(r.status)],
        ['from batch', (r) => `<code>${h(r.fromBatch)}</code>`],
        ['its row', (r) => h(r.fromRow)],
      ]) + more(d.reused.length, 'reused')
    : '<p class="note">No row reused another batch’s video.</p>';
  const open = t.openJobs
    ? `<p class="note">${plural(t.openJobs, 'job')} with no recorded end (pending, or abandoned when the batch stopped) ${t.openJobs === 1 ? 'stays' : 'stay'} in flight to the chart's end.</p>`
    : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Report ${h(d.batchId)}</title>
<style>${REPORT_CSS}</style>
</head>
<body>
<header>
<h1>Report <code id="batch-id">${h(d.batchId)}</code></h1>
<p class="meta">Made ${h(when(d.generatedAt))} from <code>${h(d.folder)}</code>${span}</p>
<p>${gallery}</p>
</header>
<section id="counts"><h2>Counts</h2>${countTiles(d)}</section>
<section id="spend"><h2>Spend</h2>${spend(d)}</section>
<section id="over-time"><h2>Over time</h2>${timelineSvg(t)}<ul class="legend">${legend}</ul>${open}</section>
<section id="failures"><h2>Failures by class</h2>${failures}</section>
<section id="late"><h2>Late arrivals</h2>${late}</section>
<section id="reused"><h2>Reused from other batches</h2>${reused}</section>
<section id="sources"><h2>Where these figures come from</h2>
<p class="note">Only the batch's folder: <code>manifest.jsonl</code> (every line), <code>jobs.jsonl</code>, and the spend ledger folded from both. Temporal is not asked.</p>
<ul class="note">${SERIES_SOURCES.map((s) => `<li>${h(s)}</li>`).join('')}</ul>
</section>
</body>
</html>
`;
}
