// A notice's body: the facts the batch handed over (counts, reason), and what only its files know (the spend
// ledger, the failure classes), with the command that comes next. Composed once per notice, so every delivery
// attempt sends the same body.
import type { Notice, NoticeCounts, NoticeEvent, NoticeRequest } from '../contract/notice';
import type { PromptResult } from '../contract/prompt';
import { writeReport } from '../report/write-report';
import { isStoreUrl } from '../store/store-url';
import { computeLedger, formatLedger } from '../results/ledger';
import { finalStates, manifestPath, readManifest } from '../results/manifest';

/** Events that end the batch: their notice comes with the batch's report page. */
const ENDS: ReadonlySet<NoticeEvent> = new Set<NoticeEvent>(['completed', 'stopped', 'cancelled', 'failed']);

/** Failure classes a notice lists, most rows first. */
const TOP_FAILURES = 5;

export async function composeNotice(request: NoticeRequest): Promise<Notice> {
  const { batchId, outDir, event } = request;
  let failures: Notice['data']['failures'] = [];
  let spend: Notice['data']['spend'];
  let report: string | undefined;
  let counts = request.counts;
  if (outDir) {
    // A folder that cannot be read (yet) leaves these out rather than holding the notice back.
    const rows = await readManifest(manifestPath(outDir)).then(finalStates, () => []);
    counts ??= countsOf(rows);
    const byCode = new Map<string, number>();
    for (const r of rows)
      if (r.status === 'failed')
        byCode.set(r.errorCode ?? 'unknown', (byCode.get(r.errorCode ?? 'unknown') ?? 0) + 1);
    failures = [...byCode]
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
      .slice(0, TOP_FAILURES)
      .map(([code, n]) => ({ code, rows: n }));
    const ledger = await computeLedger(outDir, { rows: counts.total }).catch(() => undefined);
    if (ledger) {
      const { currency, ...figures } = ledger;
      spend = {
        // `rows` is in the counts already.
        ...Object.fromEntries(
          Object.entries(figures).filter(([k, v]) => k !== 'rows' && typeof v === 'number'),
        ),
        ...(currency ? { currency } : {}),
        text: formatLedger(ledger),
      };
    }
    // The batch ended: its report page is written beside its manifest (a batch in the store: `vidbatch report`).
    if (ENDS.has(event) && !isStoreUrl(outDir))
      report = await writeReport({ batchId, folder: outDir, pageDir: outDir }).then(
        (r) => r.file,
        () => undefined,
      );
  }
  return {
    type: `batch.${event}`,
    timestamp: request.at,
    data: {
      batchId,
      ...(request.target ? { target: request.target } : {}),
      csv: request.csvPath,
      event,
      ...(request.reason ? { reason: request.reason } : {}),
      counts: counts ?? countsOf([]),
      ...(spend ? { spend } : {}),
      failures,
      ...(outDir ? { manifest: manifestPath(outDir) } : {}),
      ...(report ? { report } : {}),
      next: nextCommand(request, failures),
    },
  };
}

/** Where a batch stands by its manifest (a late video's notice comes after the batch ended). */
function countsOf(rows: readonly PromptResult[]): NoticeCounts {
  const succeeded = rows.filter((r) => r.status === 'succeeded').length;
  const failed = rows.filter((r) => r.status === 'failed').length;
  return {
    total: rows.length,
    succeeded,
    failed,
    inFlight: 0,
    notStarted: 0,
    reused: rows.filter((r) => r.reusedFrom).length,
    skipped: 0,
  };
}

/** The command a person runs next, for this event. */
function nextCommand(request: NoticeRequest, failures: Notice['data']['failures']): string {
  const { batchId, csvPath, event } = request;
  const retry = failures[0] ? `vidbatch retry-failed ${batchId} --code ${failures[0].code}` : undefined;
  switch (event) {
    case 'paused':
      return request.pauseKind === 'key'
        ? `vidbatch resume ${batchId} (once the workers have a working key; or run ${csvPath} again with one)`
        : `vidbatch resume ${batchId}`;
    case 'completed':
      return retry ?? `vidbatch results ${batchId}`;
    case 'stopped':
    case 'cancelled':
      return `vidbatch run ${csvPath} (goes on with the rows not finished)`;
    case 'failed':
      return `vidbatch status ${batchId}`;
    case 'late_video':
      return `vidbatch results ${batchId}`;
  }
}

/** A Slack incoming webhook's message: the same facts, one line each. */
export function slackText(notice: Notice): string {
  const d = notice.data;
  const c = d.counts;
  const lines = [
    `*vidbatch: batch ${d.event.replace('_', ' ')}* ${d.batchId}`,
    ...(d.reason ? [`why: ${d.reason}`] : []),
    `rows: ${c.total} (${c.succeeded} succeeded, ${c.failed} failed, ${c.inFlight} in flight, ${c.notStarted} not started)`,
    ...(d.spend?.text ? [`spend: ${d.spend.text}`] : []),
    ...(d.failures.length ? [`failures: ${d.failures.map((f) => `${f.code} ${f.rows}`).join(', ')}`] : []),
    ...(d.target ? [`target: ${d.target}`] : []),
    ...(d.manifest ? [`manifest: ${d.manifest}`] : []),
    ...(d.next ? [`next: ${d.next}`] : []),
  ];
  return lines.join('\n');
}
