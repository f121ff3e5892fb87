import { describe, expect, it } from 'vitest';
import { PriorFold } from '../../src/results/prior';
import { promptResult } from '../fixtures/prompt-result';

const at = '2030-01-01T00:00:00.000Z';

describe('PriorFold: rows that ended video_mismatch', () => {
  const fold = new PriorFold();
  fold.record(
    promptResult('m', {
      status: 'failed',
      errorCode: 'video_mismatch',
      jobId: 'vid_1',
      generation: 2,
      polls: 1,
      finishedAt: at,
    }),
  );
  fold.record(
    promptResult('d', {
      status: 'failed',
      errorCode: 'deadline_exceeded',
      jobId: 'vid_2',
      polls: 1,
      finishedAt: at,
    }),
  );

  it("offers retry-failed (another batch's folder) no job to check, and a key generation never used", () => {
    expect(fold.get('m', false)).toEqual({ generation: 3 });
    // Other failures keep their job: it may still have finished.
    expect(fold.get('d', false)).toMatchObject({ jobId: 'vid_2', generation: 0 });
  });

  it('keeps the job for a re-run of the batch itself, which checks it and pays nothing', () => {
    expect(fold.get('m')).toMatchObject({
      status: 'failed',
      errorCode: 'video_mismatch',
      jobId: 'vid_1',
      jobGeneration: 2,
      generation: 2,
    });
  });
});

describe('PriorFold: rows whose job can give nothing more', () => {
  const fold = new PriorFold();
  for (const [rowId, errorCode] of [
    ['n', 'no_video_url'],
    ['g', 'job_gone'],
    ['c', 'content_moderation'],
  ] as const)
    fold.record(
      promptResult(rowId, { status: 'failed', errorCode, jobId: `vid_${rowId}`, polls: 1, finishedAt: at }),
    );

  it('offers retry-failed no job to check: it pays for a new one, with a key generation never used', () => {
    expect(['n', 'g', 'c'].map((r) => fold.get(r, false))).toEqual([
      { generation: 1 },
      { generation: 1 },
      { generation: 1 },
    ]);
  });

  it('keeps the job and the final state for a re-run of the batch itself', () => {
    expect(fold.get('g')).toMatchObject({ status: 'failed', errorCode: 'job_gone', jobId: 'vid_g' });
    expect(fold.get('c')).toMatchObject({
      status: 'failed',
      errorCode: 'content_moderation',
      jobId: 'vid_c',
    });
  });
});

describe('PriorFold: a late video', () => {
  const ended = promptResult('r', {
    status: 'failed',
    errorCode: 'deadline_exceeded',
    jobId: 'vid_1',
    polls: 3,
    finishedAt: at,
  });
  const late = promptResult('r', {
    status: 'succeeded',
    jobId: 'vid_1',
    url: 'https://x/r.mp4',
    polls: 4,
    finishedAt: '2030-01-01T01:00:00.000Z',
    arrivedLate: { endedAs: 'deadline_exceeded', endedAt: at },
  });

  it('makes the row succeeded for a re-run (skipped, nothing paid), even with its ended line written after it', () => {
    for (const order of [
      [ended, late],
      [late, ended],
      [ended, late, ended],
    ]) {
      const fold = new PriorFold();
      for (const r of order) fold.record(r);
      expect(fold.get('r')).toMatchObject({ status: 'succeeded', jobId: 'vid_1', url: 'https://x/r.mp4' });
    }
  });
});
