import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { PromptResult } from '../../src/contract/prompt';
import type { JournalEntry } from '../../src/results/jobs-journal';
import { computeLedger, foldLedger, formatLedger } from '../../src/results/ledger';
import type { Prices } from '../../src/results/prices';

const T = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();

function line(rowId: string, over: Partial<PromptResult>): PromptResult {
  return {
    rowId,
    line: 2,
    prompt: `p ${rowId}`,
    model: 'm1',
    input: { prompt: `p ${rowId}` },
    parameters: { resolution: '720P', duration: 5 },
    status: 'succeeded',
    attempts: 1,
    polls: 1,
    finishedAt: T(30),
    ...over,
  };
}

const job = (rowId: string, jobId: string, generation = 0, at = T(1)): JournalEntry => ({
  rowId,
  jobId,
  generation,
  at,
});
const unknown = (rowId: string, generation = 0): JournalEntry => ({
  rowId,
  generation,
  unknown: true,
  at: T(1),
});

describe('spend ledger', () => {
  it('counts each job once: kept, failed at the gateway, cancelled and deadline-exceeded (abandoned)', () => {
    const journal = ['a', 'b', 'c', 'd'].map((r) => job(r, `vid_${r}`));
    const lines = [
      line('a', { jobId: 'vid_a' }),
      line('b', { jobId: 'vid_b', status: 'failed', errorCode: 'moderation_failed' }),
      line('c', { jobId: 'vid_c', status: 'failed', errorCode: 'cancelled' }),
      line('d', { jobId: 'vid_d', status: 'failed', errorCode: 'deadline_exceeded' }),
      // a refusal: no job was made
      line('e', { status: 'failed', errorCode: 'invalid_request' }),
    ];
    const l = foldLedger(lines, journal);
    expect(l).toMatchObject({
      rows: 5,
      jobsMade: 4,
      kept: 1,
      failedAtGateway: 1,
      abandoned: 2,
      pending: 0,
      unknown: 0,
    });
    expect(formatLedger(l)).toBe(
      'jobs made: 4 for 5 rows (1 kept, 1 failed at the gateway, 2 abandoned); abandoned jobs may still finish and be billed',
    );
  });

  it('a job stopped at the provider is counted stopped, not abandoned; one found ended there failed', () => {
    const journal = ['a', 'b', 'c', 'd'].map((r) => job(r, `vid_${r}`));
    const lines = [
      line('a', { jobId: 'vid_a', status: 'failed', errorCode: 'cancelled', jobStop: 'stopped' }),
      line('b', { jobId: 'vid_b', status: 'failed', errorCode: 'deadline_exceeded', jobStop: 'stopped' }),
      line('c', { jobId: 'vid_c', status: 'failed', errorCode: 'cancelled', jobStop: 'ended' }),
      line('d', { jobId: 'vid_d', status: 'failed', errorCode: 'cancelled', jobStop: 'not_stopped' }),
    ];
    const l = foldLedger(lines, journal);
    expect(l).toMatchObject({ jobsMade: 4, kept: 0, stopped: 2, failedAtGateway: 1, abandoned: 1 });
    expect(formatLedger(l)).toBe(
      'jobs made: 4 for 4 rows (0 kept, 1 failed at the gateway, 2 stopped at the provider, 1 abandoned); abandoned jobs may still finish and be billed',
    );
    // None stopped: the field is absent, as in ledgers from before stops.
    expect(foldLedger([line('a', { jobId: 'vid_a' })], [job('a', 'vid_a')])).not.toHaveProperty('stopped');
  });

  it('a late video (its row had ended deadline_exceeded or cancelled) is kept, and said: arrived late', () => {
    const journal = ['a', 'b', 'c'].map((r) => job(r, `vid_${r}`));
    const ended = (r: string, code: string) =>
      line(r, { jobId: `vid_${r}`, status: 'failed', errorCode: code, finishedAt: T(10) });
    const late = (r: string, code: string) =>
      line(r, { jobId: `vid_${r}`, finishedAt: T(40), arrivedLate: { endedAs: code, endedAt: T(10) } });
    const lines = [
      ended('a', 'deadline_exceeded'),
      ended('b', 'cancelled'),
      ended('c', 'deadline_exceeded'),
      late('a', 'deadline_exceeded'),
      late('b', 'cancelled'),
      // The batch's copy of b's ended line, landing after the late line: it stays superseded.
      ended('b', 'cancelled'),
    ];
    const l = foldLedger(lines, journal);
    expect(l).toMatchObject({ jobsMade: 3, kept: 2, arrivedLate: 2, abandoned: 1 });
    expect(formatLedger(l)).toBe(
      'jobs made: 3 for 3 rows (2 kept (arrived late: 2), 1 abandoned); abandoned jobs may still finish and be billed',
    );
    expect(foldLedger(lines.slice(0, 3), journal).arrivedLate).toBeUndefined();
  });

  it('a job vidbatch gave up checking (check_failed, poll_failed) is abandoned, not failed at the gateway', () => {
    // Status checks that kept failing end the row with the job id kept: nobody saw the job end, so it may
    // still finish and be billed. A job the gateway failed or no longer knew stays "failed at the gateway".
    const journal = ['a', 'b', 'c', 'd'].map((r) => job(r, `vid_${r}`));
    const lines = [
      line('a', { jobId: 'vid_a', status: 'failed', errorCode: 'check_failed' }),
      line('b', { jobId: 'vid_b', status: 'failed', errorCode: 'poll_failed' }),
      line('c', { jobId: 'vid_c', status: 'failed', errorCode: 'not_found' }),
      line('d', { jobId: 'vid_d', status: 'failed', errorCode: 'job_failed' }),
    ];
    const l = foldLedger(lines, journal);
    expect(l).toMatchObject({ jobsMade: 4, kept: 0, failedAtGateway: 2, abandoned: 2, pending: 0 });
    expect(formatLedger(l)).toBe(
      'jobs made: 4 for 4 rows (0 kept, 2 failed at the gateway, 2 abandoned); abandoned jobs may still finish and be billed',
    );
    // Without abandoned jobs, no such note.
    expect(formatLedger(foldLedger([line('d', { jobId: 'vid_d' })], [job('d', 'vid_d')]))).toBe(
      'jobs made: 1 for 1 row (1 kept)',
    );
  });

  it('a row re-run under a later key generation: the earlier jobs are abandoned, the last one kept', () => {
    // Run 1 cancelled row a with job g0; run 2 checked it (failed), made g1 (journalled, never recorded: the
    // batch was terminated); run 3 checked g1 (gone) and made g2, which succeeded.
    const journal = [job('a', 'vid_a0', 0, T(1)), job('a', 'vid_a1', 1, T(40)), job('a', 'vid_a2', 2, T(80))];
    const lines = [
      line('a', { jobId: 'vid_a0', status: 'failed', errorCode: 'cancelled', finishedAt: T(30) }),
      line('a', { jobId: 'vid_a2', generation: 2, finishedAt: T(90) }),
    ];
    expect(foldLedger(lines, journal)).toMatchObject({ jobsMade: 3, kept: 1, abandoned: 2, pending: 0 });
  });

  it('a job made after the row was last recorded is pending (in flight, or not recorded yet)', () => {
    const journal = [job('a', 'vid_a0', 0, T(1)), job('a', 'vid_a1', 1, T(40)), job('b', 'vid_b', 0, T(2))];
    const lines = [
      line('a', { jobId: 'vid_a0', status: 'failed', errorCode: 'cancelled', finishedAt: T(30) }),
    ];
    const l = foldLedger(lines, journal, { rows: 3 });
    expect(l).toMatchObject({ rows: 3, jobsMade: 3, kept: 0, abandoned: 1, pending: 2 });
    expect(formatLedger(l)).toBe(
      'jobs made: 3 for 3 rows (0 kept, 1 abandoned, 2 pending); abandoned jobs may still finish and be billed',
    );
  });

  it('unknown outcomes are an upper bound: per row the journal count, or the manifest count when larger', () => {
    const journal = [
      unknown('a'),
      job('a', 'vid_a'), // the resend went through
      unknown('b'),
      unknown('b'),
      job('c', 'vid_c'),
    ];
    const lines = [
      line('a', { jobId: 'vid_a', unknownSubmits: 1 }),
      line('b', { status: 'failed', errorCode: 'submit_unknown', unknownSubmits: 2 }),
      // the journal write of c's unknown outcome failed: the manifest still counts it
      line('c', { jobId: 'vid_c', unknownSubmits: 1 }),
    ];
    const l = foldLedger(lines, journal);
    expect(l).toMatchObject({ jobsMade: 2, kept: 2, unknown: 4 });
    expect(formatLedger(l)).toBe('jobs made: 2 for 3 rows (2 kept, up to 4 more unknown)');
  });

  it('a job reported by an earlier line and kept by the row later counts once, as kept', () => {
    // Cancelled with its job, then a re-run found the same job completed.
    const journal = [job('a', 'vid_a')];
    const lines = [
      line('a', { jobId: 'vid_a', status: 'failed', errorCode: 'cancelled', finishedAt: T(10) }),
      line('a', { jobId: 'vid_a', finishedAt: T(20) }),
    ];
    expect(foldLedger(lines, journal)).toMatchObject({ jobsMade: 1, kept: 1, abandoned: 0 });
  });

  it('prices every job made by its row (manifest line, else the journal), and the unknowns as "up to"', () => {
    const prices: Prices = {
      entries: [
        { model: 'm1', resolution: '*', perSecond: 0.1 },
        { model: 'm2', resolution: '1080P', perVideo: 2 },
      ],
      currency: 'USD',
    };
    const journal: JournalEntry[] = [
      job('a', 'vid_a0'),
      job('a', 'vid_a1', 1, T(40)),
      { ...job('b', 'vid_b'), model: 'm2', resolution: '1080P', duration: 8 }, // in flight
      { ...job('c', 'vid_c'), model: 'm3' }, // no price for m3
      unknown('a'),
    ];
    const lines = [
      line('a', {
        jobId: 'vid_a0',
        status: 'failed',
        errorCode: 'deadline_exceeded',
        parameters: { duration: 10 },
      }),
      line('a', { jobId: 'vid_a1', generation: 1, finishedAt: T(50), parameters: { duration: 10 } }),
    ];
    const l = foldLedger(lines, journal, { prices });
    expect(l).toMatchObject({ jobsMade: 4, kept: 1, abandoned: 1, pending: 2, unknown: 1, unpriced: 1 });
    expect(l.estimatedCost).toBeCloseTo(1 + 1 + 2);
    expect(l.unknownCost).toBeCloseTo(1);
    expect(formatLedger(l)).toBe(
      'jobs made: 4 for 3 rows (1 kept, 1 abandoned, 2 pending, up to 1 more unknown), estimated cost 4.00 USD (up to 1.00 USD more); 1 job without a price; abandoned jobs may still finish and be billed',
    );
  });

  it('reads a batch folder (every manifest line, torn journal tail skipped) and groups thousands', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-ledger-'));
    const journal: JournalEntry[] = [];
    const lines: PromptResult[] = [];
    for (let i = 0; i < 1000; i++) {
      journal.push(job(`r${i}`, `vid_${i}`));
      lines.push(line(`r${i}`, { jobId: `vid_${i}` }));
    }
    for (let i = 0; i < 12; i++) journal.push(job(`r${i}`, `vid_x${i}`, 1, T(50)));
    for (let i = 0; i < 12; i++)
      lines.push(line(`r${i}`, { jobId: `vid_x${i}`, generation: 1, finishedAt: T(60) }));
    for (let i = 0; i < 4; i++) journal.push(unknown(`r${i}`, 1));
    await writeFile(join(dir, 'manifest.jsonl'), lines.map((r) => JSON.stringify(r)).join('\n') + '\n');
    await writeFile(
      join(dir, 'jobs.jsonl'),
      journal.map((e) => JSON.stringify(e)).join('\n') + '\n{"rowId":"r9","jobId":"vid_',
    );
    const l = await computeLedger(dir);
    expect(formatLedger(l)).toBe(
      'jobs made: 1,012 for 1,000 rows (1,000 kept, 12 abandoned, up to 4 more unknown); abandoned jobs may still finish and be billed',
    );
    expect(await computeLedger(join(dir, 'missing'))).toMatchObject({ rows: 0, jobsMade: 0 });
  });
});
