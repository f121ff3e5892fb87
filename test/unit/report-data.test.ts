// `vidbatch report` without a batch: its facts from a hand-made manifest and journal (counts, ledger, failure
// classes, late arrivals, reused rows, the timeline exact and sampled), and the page made of them (escaped,
// no script). The spawned command and the page in a browser are in test/integration/cli-report.test.ts.
import { describe, expect, it } from 'vitest';
import type { PromptResult } from '../../src/contract/prompt';
import type { JournalEntry } from '../../src/results/jobs-journal';
import { buildReport, retryCommand, shellWord } from '../../src/report/report-data';
import { reportPage } from '../../src/report/report-page';
import { buildTimeline, submitRetries } from '../../src/report/timeline';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const at = (s: number) => new Date(T0 + s * 1000).toISOString();
const TRICKY = 'a "quoted" fox </script><img src=x onerror="window.pwned=1"> & \'more\'';

function line(
  over: Partial<PromptResult> & Pick<PromptResult, 'rowId' | 'line' | 'status' | 'finishedAt'>,
): PromptResult {
  return {
    prompt: `prompt of ${over.rowId}`,
    model: 'm',
    input: {},
    parameters: {},
    attempts: 1,
    polls: 1,
    ...over,
  };
}

const LINES: PromptResult[] = [
  line({
    rowId: 'r6',
    line: 7,
    status: 'succeeded',
    jobId: 'jo1',
    attempts: 0,
    // The other batch's submit time, which this batch never waited through.
    submittedAt: at(-100),
    finishedAt: at(0.5),
    reusedFrom: { batchId: 'batch-other', rowId: 'o1' },
  }),
  line({
    rowId: 'r4',
    line: 5,
    status: 'failed',
    jobId: 'j4',
    errorCode: 'job_gone',
    errorMessage: 'gone',
    submittedAt: at(2),
    finishedAt: at(3),
  }),
  line({
    rowId: 'r9',
    line: 10,
    status: 'failed',
    attempts: 0,
    errorMessage: 'no code at all',
    finishedAt: at(3),
  }),
  line({
    rowId: 'r8',
    line: 9,
    status: 'failed',
    errorCode: 'submit_unknown',
    attempts: 2,
    unknownSubmits: 2,
    finishedAt: at(4),
  }),
  line({ rowId: 'r1', line: 2, status: 'succeeded', jobId: 'j1', submittedAt: at(1), finishedAt: at(5) }),
  line({
    rowId: 'r3',
    line: 4,
    status: 'failed',
    prompt: TRICKY,
    jobId: 'j3',
    errorCode: 'content_moderation',
    errorMessage: 'refused <b>',
    submittedAt: at(2),
    finishedAt: at(6),
  }),
  line({
    rowId: 'r5',
    line: 6,
    status: 'failed',
    jobId: 'j5',
    errorCode: 'deadline_exceeded',
    submittedAt: at(1),
    finishedAt: at(7),
  }),
  // Two 429s before its submit went through: attempts 3.
  line({
    rowId: 'r2',
    line: 3,
    status: 'succeeded',
    jobId: 'j2',
    attempts: 3,
    submittedAt: at(4),
    finishedAt: at(8),
  }),
  // The video of r5's job came after all.
  line({
    rowId: 'r5',
    line: 6,
    status: 'succeeded',
    jobId: 'j5',
    submittedAt: at(1),
    finishedAt: at(9),
    arrivedLate: { endedAs: 'deadline_exceeded', endedAt: at(7) },
  }),
];

const JOURNAL: JournalEntry[] = [
  { rowId: 'r1', jobId: 'j1', generation: 0, at: at(1) },
  { rowId: 'r5', jobId: 'j5', generation: 0, at: at(1) },
  { rowId: 'r3', jobId: 'j3', generation: 0, at: at(2) },
  { rowId: 'r4', jobId: 'j4', generation: 0, at: at(2) },
  { rowId: 'r8', generation: 0, unknown: true, at: at(2.5) },
  { rowId: 'r8', generation: 0, unknown: true, at: at(3.5) },
  { rowId: 'r2', jobId: 'j2', generation: 0, at: at(4) },
  // A job whose row has no line yet: in flight when the folder was read.
  { rowId: 'r7', jobId: 'j7', generation: 0, at: at(6) },
];

const GALLERY = { href: 'review.html', exists: true, command: 'vidbatch review batch-x' };
const report = () =>
  buildReport(
    { batchId: 'batch-x', folder: '/o/out/batch-x', lines: LINES, journal: JOURNAL },
    { gallery: GALLERY, generatedAt: at(60) },
  );

describe('report data', () => {
  it('counts the rows by their final state, and what the journal alone knows', () => {
    expect(report().counts).toEqual({
      rows: 9,
      succeeded: 4,
      failed: 4,
      noOutcome: 1,
      reused: 1,
      arrivedLate: 1,
      unknownSubmitRows: 1,
      submitRetries: 2,
    });
  });

  it('has the spend ledger of the same lines and journal', () => {
    const { ledger, ledgerLine } = report();
    expect(ledger).toMatchObject({
      jobsMade: 6,
      kept: 3,
      failedAtGateway: 2,
      pending: 1,
      unknown: 2,
      reused: 1,
    });
    expect(ledgerLine).toMatch(
      /^jobs made: 6 for 9 rows \(3 kept.*, 2 failed at the gateway, 1 pending, up to 2 more unknown/,
    );
  });

  it('groups failures by code, each with its rows and the command that retries it', () => {
    const { failures } = report();
    expect(failures.map((f) => [f.code, f.rows.map((r) => r.rowId), f.retryCommand])).toEqual([
      [undefined, ['r9'], 'vidbatch retry-failed batch-x'],
      ['content_moderation', ['r3'], 'vidbatch retry-failed batch-x --code content_moderation'],
      ['job_gone', ['r4'], 'vidbatch retry-failed batch-x --code job_gone'],
      ['submit_unknown', ['r8'], 'vidbatch retry-failed batch-x --code submit_unknown'],
    ]);
    // The codes a retry without --code leaves out say so.
    expect(failures[1]!.caution).toMatch(/refused their content/);
    expect(failures[2]!.caution).toMatch(/no longer knows their job/);
    expect(failures[3]!.caution).toBeUndefined();
    expect(failures[1]!.rows[0]).toMatchObject({
      line: 4,
      prompt: TRICKY,
      jobId: 'j3',
      errorMessage: 'refused <b>',
    });
  });

  it('lists late arrivals and reused rows from their last lines', () => {
    const d = report();
    expect(d.lateArrivals).toEqual([
      {
        rowId: 'r5',
        line: 6,
        prompt: 'prompt of r5',
        jobId: 'j5',
        finishedAt: at(9),
        endedAs: 'deadline_exceeded',
        endedAt: at(7),
      },
    ]);
    expect(d.reused).toEqual([
      {
        rowId: 'r6',
        line: 7,
        prompt: 'prompt of r6',
        jobId: 'jo1',
        finishedAt: at(0.5),
        status: 'succeeded',
        fromBatch: 'batch-other',
        fromRow: 'o1',
      },
    ]);
  });

  it('draws the timeline from the recorded times: one sample per time when they are few', () => {
    const t = report().timeline;
    expect(t.at.map((ms) => (ms - T0) / 1000)).toEqual([0.5, 1, 2, 3, 4, 5, 6, 8, 9]);
    expect(t.succeeded).toEqual([1, 1, 1, 1, 1, 2, 2, 3, 4]);
    expect(t.failed).toEqual([0, 0, 0, 2, 3, 3, 4, 4, 4]);
    // j5 stays in flight to its late video (9 s); j7 has no end; the reused job was never waited for.
    expect(t.inFlight).toEqual([0, 2, 4, 3, 4, 3, 3, 2, 1]);
    expect(t.retries).toEqual([0, 0, 0, 0, 2, 2, 2, 2, 2]);
    expect(t.openJobs).toBe(1);
  });

  it('reads a late video the same whichever of its lines was written first', () => {
    const swapped = [...LINES];
    const ended = swapped.findIndex((r) => r.rowId === 'r5' && r.status === 'failed');
    swapped.push(...swapped.splice(ended, 1));
    expect(buildTimeline(swapped, JOURNAL)).toEqual(buildTimeline(LINES, JOURNAL));
    const d = buildReport(
      { batchId: 'batch-x', folder: '/o/out/batch-x', lines: swapped, journal: JOURNAL },
      { gallery: GALLERY, generatedAt: at(60) },
    );
    expect(d.counts).toEqual(report().counts);
    expect(d.lateArrivals).toEqual(report().lateArrivals);
  });

  it('samples a long timeline in equal spans: counts at each end, the most jobs in flight during it', () => {
    const t = buildTimeline(LINES, JOURNAL, 3);
    expect(t.at).toHaveLength(3);
    expect(t.at.at(-1)).toBe(T0 + 9000);
    expect(t.succeeded).toEqual([1, 2, 4]);
    expect(t.failed).toEqual([2, 4, 4]);
    expect(t.inFlight).toEqual([4, 4, 3]);
    expect(t.retries).toEqual([0, 2, 2]);
  });

  it('counts submits sent again from attempts, less unknown outcomes and the one that went through', () => {
    expect(submitRetries({ attempts: 1 })).toBe(0);
    expect(submitRetries({ attempts: 4, unknownSubmits: 1 })).toBe(2);
    expect(submitRetries({ attempts: 2, unknownSubmits: 2, errorCode: 'submit_unknown' })).toBe(0);
    expect(submitRetries({ attempts: 3, unknownSubmits: 1, errorCode: 'submit_unknown' })).toBe(2);
    expect(submitRetries({ attempts: 0 })).toBe(0);
  });

  it('is empty, not broken, for a folder that recorded nothing', () => {
    const d = buildReport({ batchId: 'batch-x', folder: '/o', lines: [], journal: [] }, { gallery: GALLERY });
    expect(d.counts.rows).toBe(0);
    expect(d.timeline.at).toEqual([]);
    expect(reportPage(d)).toContain('Nothing with a time is recorded');
  });

  it('quotes an error code a shell would read otherwise', () => {
    expect(shellWord('content_moderation')).toBe('content_moderation');
    expect(shellWord("it's $(bad)")).toBe(`'it'\\''s $(bad)'`);
    expect(retryCommand('batch-x', 'a b', ' --out-root o')).toBe(
      "vidbatch retry-failed batch-x --code 'a b' --out-root o",
    );
  });
});

describe('report page', () => {
  it('is one self-contained page with no script, every recorded text escaped', () => {
    const html = reportPage(report());
    expect(html).not.toMatch(/<script|<link|src=["']?http/i);
    expect(html).toContain("default-src 'none'");
    expect(html).not.toContain('</script><img');
    expect(html).toContain(
      'a &#34;quoted&#34; fox &#60;/script&#62;&#60;img src=x onerror=&#34;window.pwned=1&#34;&#62; &#38; &#39;more&#39;',
    );
    expect(html).toContain('refused &#60;b&#62;');
  });

  it('has the counts, the chart, each failure class with its retry command, and links into the gallery', () => {
    const html = reportPage(report());
    expect(html).toMatch(/data-count="succeeded" class="ok"><dt>succeeded<\/dt><dd>4<\/dd>/);
    expect(html).toMatch(/<polyline class="s-inFlight" data-series="inFlight" points="[\d., ]+">/);
    expect(html).toContain(
      '<code class="command retry">vidbatch retry-failed batch-x --code content_moderation</code>',
    );
    expect(html).toContain('href="review.html#row=r3"');
    expect(html).toContain('<a id="gallery-link" href="review.html">');
    expect(html).toContain('2026-01-01 00:00:09 UTC');
  });
});
