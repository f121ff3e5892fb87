import { describe, expect, it } from 'vitest';
import { DEFAULT_BATCH_OPTIONS, type BatchOptions } from '../../src/contract/batch-options';
import type { PromptResult } from '../../src/contract/prompt';
import { BatchState } from '../../src/workflows/batch-state';
import { promptResult } from '../fixtures/prompt-result';

/** A batch state whose effects are recorded in order. */
function batch(options: Partial<BatchOptions> = {}, totalRows = 20, carry?: ReturnType<BatchState['carry']>) {
  const effects: string[] = [];
  const told: string[] = [];
  const state = new BatchState(
    { batchId: 'batch-1', totalRows, options: { ...DEFAULT_BATCH_OPTIONS, ...options }, carry },
    1000,
    {
      setState: (s) => effects.push(`state:${s}`),
      unblock: (rowId) => effects.push(`unblock:${rowId}`),
      needsPerson: (kind, _reason, n) => told.push(`${kind}-${n}`),
    },
  );
  return { state, effects, told };
}

function result(rowId: string, status: PromptResult['status']): PromptResult {
  return promptResult(rowId, { status });
}

describe('BatchState', () => {
  it('tells each pause a person must act on once, counted over the batch life; not an operator pause', () => {
    const { state, told } = batch();
    for (const row of ['a', 'b', 'c']) state.started(row);
    // Every row refused in turn: one pause, told once.
    for (const row of ['a', 'b', 'c']) state.promptBlocked(row, 'HTTP 401');
    expect(told).toEqual(['key-1']);
    state.resume();
    state.pause('lunch');
    state.resume();
    expect(told).toEqual(['key-1']);
    state.inputFailed('rows could not be read');
    state.inputFailed('rows could not be read again');
    expect(told).toEqual(['key-1', 'input-2']);
    // The count goes on across continue-as-new: the next pause is the third.
    const next = batch({}, 20, state.carry([]));
    next.state.resume();
    next.state.recordingFailed('disk full');
    expect(next.told).toEqual(['recording-3']);
  });

  it('starts prompts while the window has room, and counts what finishes', () => {
    const { state } = batch({ concurrency: 2 });
    expect(state.canStart(5, false)).toBe(true);
    state.started('a');
    state.started('b');
    expect(state.canStart(5, false)).toBe(false);
    expect(state.canStart(0, false)).toBe(false);
    state.finished(result('a', 'succeeded'));
    expect(state.canStart(5, false)).toBe(true);
    expect(state.progress(1000)).toMatchObject({ started: 2, inFlight: 1, succeeded: 1, failed: 0 });
    state.setConcurrency(1);
    expect(state.canStart(5, false)).toBe(false);
  });

  it('an operator pause holds new prompts until resume, which unblocks the prompts that waited', () => {
    const { state, effects } = batch();
    state.started('a');
    state.started('b');
    state.pause('');
    expect(state.pausedReason).toBe('paused by operator');
    expect(state.canStart(5, false)).toBe(false);
    state.promptBlocked('b', '403 key disabled');
    state.promptBlocked('gone', 'not in flight: ignored');
    expect(state.progress(1000).blocked).toBe(1);
    const tick = state.tick;
    state.resume();
    expect(state.tick).toBeGreaterThan(tick);
    expect(state.pausedReason).toBeNull();
    expect(state.canStart(5, false)).toBe(true);
    expect(effects).toEqual(['state:paused', 'unblock:b', 'state:running']);
  });

  it('a refused key pauses the batch once, naming the reason', () => {
    const { state, effects } = batch();
    state.started('a');
    state.started('b');
    state.promptBlocked('a', '401 unauthorized');
    state.promptBlocked('b', '401 unauthorized');
    expect(effects).toEqual(['state:paused']);
    expect(state.pausedReason).toContain('the gateway refused the API key (401 unauthorized)');
    state.finished(result('a', 'failed'));
    expect(state.progress(1000).blocked).toBe(1);
  });

  it('a 429 gates new prompts until the latest Retry-After', () => {
    const { state } = batch();
    state.started('a');
    state.started('b');
    state.promptRateLimited('a', 5000);
    state.promptRateLimited('b', 3000);
    expect(state.gateUntil).toBe(5000);
    expect(state.gateHeld(4999)).toBe(true);
    expect(state.gateHeld(5000)).toBe(false);
    expect(state.progress(4000)).toMatchObject({ rateLimited: 1, rateLimitedUntil: 5000 });
    expect(state.progress(6000)).toMatchObject({ rateLimited: 0, rateLimitedUntil: null });
  });

  it('guard rails stop the batch once, with the first rail crossed', () => {
    const failures = batch({ maxFailures: 2 });
    for (const id of ['a', 'b', 'c']) failures.state.started(id);
    failures.state.finished(result('a', 'failed'));
    expect(failures.state.stoppedReason).toBeNull();
    failures.state.finished(result('b', 'failed'));
    expect(failures.state.stoppedReason).toBe('2 rows failed (--max-failures 2)');
    failures.state.finished(result('c', 'failed'));
    expect(failures.effects).toEqual(['state:stopped']);
    expect(failures.state.canStart(5, false)).toBe(false);
    expect(failures.state.allStarted()).toBe(true);

    const rate = batch({ maxFailureRate: 0.5 });
    for (let i = 0; i < 10; i++) rate.state.started(`r${i}`);
    for (let i = 0; i < 6; i++) rate.state.finished(result(`r${i}`, 'failed'));
    expect(rate.state.stoppedReason).toBeNull(); // fewer than 10 finished
    for (let i = 6; i < 10; i++) rate.state.finished(result(`r${i}`, 'succeeded'));
    expect(rate.state.stoppedReason).toBe('6 of 10 finished rows failed (--max-failure-rate 0.5)');

    const spend = batch({ maxSubmissions: 3 }, 10);
    for (const id of ['a', 'b']) spend.state.started(id);
    expect(spend.state.stoppedReason).toBeNull();
    spend.state.started('c');
    expect(spend.state.stoppedReason).toBe('3 jobs submitted (--max-submissions 3)');
    expect(spend.state.result()).toMatchObject({ notStarted: 7, stoppedReason: spend.state.stoppedReason });
    // A cap equal to the file's size is no stop.
    const whole = batch({ maxSubmissions: 2 }, 2);
    whole.state.started('a');
    whole.state.started('b');
    expect(whole.state.stoppedReason).toBeNull();
  });

  it('the batch deadline: a timer while it is ahead, a stop once it passed', () => {
    expect(batch().state.untilDeadline(1000)).toBeUndefined();
    const ahead = batch({ deadlineAt: 61_000 });
    expect(ahead.state.untilDeadline(1000)).toBe(60_000);
    expect(ahead.state.stoppedReason).toBeNull();
    ahead.state.deadlinePassed();
    expect(ahead.state.stoppedReason).toBe('the batch deadline passed');
    const passed = batch({ deadlineAt: 500 });
    expect(passed.state.untilDeadline(1000)).toBeUndefined();
    expect(passed.effects).toEqual(['state:stopped']);
  });

  it('a run is full after promptsPerRun prompts or when Temporal suggests continue-as-new', () => {
    const { state } = batch({ promptsPerRun: 2 });
    expect(state.runFull(false)).toBe(false);
    expect(state.runFull(true)).toBe(true);
    state.started('a');
    state.started('b');
    expect(state.runFull(false)).toBe(true);
    expect(state.canStart(5, state.runFull(false))).toBe(false);
  });

  it('carries counts, window, pause, gate and stop across continue-as-new', () => {
    const first = batch({ concurrency: 3 }, 10);
    first.state.started('a');
    first.state.started('b');
    first.state.finished(result('a', 'succeeded'));
    first.state.finished(result('b', 'failed'));
    first.state.started('c'); // still in flight when the run continues as new: the window slides on
    first.state.setConcurrency(7);
    first.state.promptRateLimited('x', 9000);
    first.state.manifestPath = '/out/manifest.jsonl';
    first.state.pause('night');
    const carry = first.state.carry([]);
    expect(carry).toEqual({
      nextRow: 3,
      counts: { succeeded: 1, failed: 1 },
      startedAt: 1000,
      concurrency: 7,
      pausedReason: 'night',
      pauseKind: 'operator',
      gateUntil: 9000,
      manifestPath: '/out/manifest.jsonl',
      runs: 1,
      stoppedReason: null,
      skipped: 0,
      reused: 0,
      unknownSubmitRows: 0,
      unknownInARow: 0,
      personPauses: 0,
      notices: [],
      posts: 0,
      window: {
        inFlight: ['c'],
        awaitingPost: ['c'],
        blocked: [],
        priorUnknown: [],
        rateLimited: [['x', 9000]],
        holdReason: null,
        capacityGate: null,
        results: [],
      },
    });
    const next = batch({ concurrency: 3 }, 10, carry).state;
    expect(next.progress(2000)).toMatchObject({
      started: 3,
      succeeded: 1,
      failed: 1,
      concurrency: 7,
      pausedReason: 'night',
      startedAt: 1000,
      manifestPath: '/out/manifest.jsonl',
      inFlight: 1,
      rateLimited: 1,
    });
    expect(next.carry([]).runs).toBe(2);
    // The carried prompt's end is heard by the next run.
    next.finished(result('c', 'succeeded'));
    expect(next.result()).toEqual({
      batchId: 'batch-1',
      total: 10,
      succeeded: 2,
      failed: 1,
      manifestPath: '/out/manifest.jsonl',
      notStarted: 7,
      skipped: 0,
      reused: 0,
      unknownSubmitRows: 0,
    });
  });

  it("accepts only whole windows from 1 to the server's 2,000 pending children", () => {
    expect(() => BatchState.checkConcurrency(1)).not.toThrow();
    expect(() => BatchState.checkConcurrency(2000)).not.toThrow();
    for (const bad of [0, -1, 1.5, Number.NaN])
      expect(() => BatchState.checkConcurrency(bad)).toThrow('concurrency must be a whole number');
    expect(() => BatchState.checkConcurrency(2001)).toThrow(
      /at most 2000: .*limit\.numPendingChildExecutions\.error/,
    );
  });

  it('counts rows done in an earlier run as succeeded and skipped, and carries them', () => {
    const { state } = batch({ maxSubmissions: 2 }, 5);
    state.skip({ status: 'succeeded', generation: 0 });
    state.skip({ status: 'succeeded', generation: 1, unknownSubmits: 1 });
    state.started('c');
    // skipped rows are not submissions: the spend cap still allows one more
    expect(state.stoppedReason).toBeNull();
    state.started('d');
    expect(state.stoppedReason).toMatch(/2 jobs submitted/);
    expect(state.progress(2000)).toMatchObject({
      started: 4,
      succeeded: 2,
      skipped: 2,
      unknownSubmitRows: 1,
    });
    const next = batch({}, 5, state.carry([])).state;
    expect(next.progress(2000)).toMatchObject({ skipped: 2, unknownSubmitRows: 1, succeeded: 2 });
    expect(next.result()).toMatchObject({ skipped: 2, succeeded: 2 });
  });

  it('counts rows with unknown submit outcomes, from this run or an earlier one', () => {
    const { state } = batch({}, 5);
    state.started('a', { generation: 1, unknownSubmits: 1, jobId: 'vid_1' });
    state.started('b');
    state.started('c');
    state.finished(result('a', 'succeeded'));
    state.finished({ ...result('b', 'failed'), unknownSubmits: 2 });
    state.finished(result('c', 'succeeded'));
    expect(state.progress(2000).unknownSubmitRows).toBe(2);
  });

  it('shows a gateway hold with its end time, and the reason a prompt gave', () => {
    const { state } = batch();
    const until = Date.UTC(2030, 0, 1, 3, 10);
    state.promptRateLimited('a', until);
    expect(state.progress(until - 3600_000)).toMatchObject({
      holdUntil: until,
      holdReason: 'the gateway asked to wait until 03:10 UTC (Retry-After)',
    });
    expect(state.progress(until + 1)).toMatchObject({ holdUntil: null, holdReason: null });
    expect(state.progress(until - 2 * 86_400_000).holdReason).toContain('2030-01-01 03:10 UTC');
    state.promptRateLimited('b', until + 1000, 'quota exhausted; the gateway asked to wait until 03:10');
    expect(state.progress(until).holdReason).toBe('quota exhausted; the gateway asked to wait until 03:10');
  });

  it('the unknown-outcome breaker: N in a row pause submitting and hold resends until resume', () => {
    const { state, effects } = batch({ pauseAfterUnknown: 3 });
    for (const id of ['a', 'b', 'c', 'd']) state.started(id);
    state.submitOutcome({ rowId: 'a', outcome: 'unknown', waiting: true }, 0);
    state.submitOutcome({ rowId: 'b', outcome: 'sent' }, 0); // a job id came back: not in a row
    state.submitOutcome({ rowId: 'b', outcome: 'unknown', waiting: false }, 0);
    state.submitOutcome({ rowId: 'c', outcome: 'unknown', waiting: true }, 0);
    expect(state.pausedReason).toBeNull();
    expect(effects).toEqual(['unblock:a', 'unblock:c']); // resends go on at once
    state.submitOutcome({ rowId: 'd', outcome: 'unknown', waiting: true }, 0);
    expect(state.pauseKind).toBe('breaker');
    expect(state.pausedReason).toBe(
      '3 submits in a row had an unknown outcome: paused so as not to pay for jobs vidbatch cannot see; check the gateway, then resume the batch',
    );
    expect(state.canStart(5, false)).toBe(false);
    expect(state.progress(0).blocked).toBe(1); // d's resend waits
    state.resume();
    expect(effects.slice(2)).toEqual(['state:paused', 'unblock:d', 'state:running']);
    expect(state.carry([]).unknownInARow).toBe(0); // resume starts the count again
  });

  it('pauses as unreachable with since when, and goes on by itself once a submit is sent', () => {
    const { state, effects } = batch();
    state.started('a');
    state.started('b');
    const since = Date.UTC(2030, 0, 1, 2, 14);
    state.submitOutcome(
      { rowId: 'a', outcome: 'unreachable', reason: 'connect ECONNREFUSED', sinceMs: since },
      since + 120_000,
    );
    expect(state.pausedReason).toMatch(/^gateway unreachable since 02:14 UTC: connect ECONNREFUSED; /);
    expect(state.progress(0)).toMatchObject({ pauseKind: 'unreachable', blocked: 1 });
    state.submitOutcome({ rowId: 'b', outcome: 'sent' }, since + 180_000);
    expect(state.pausedReason).toBeNull();
    expect(effects).toEqual(['state:paused', 'unblock:a', 'state:running']);
  });

  it('a refused key is not lifted by a sent submit; a recording failure waits for resume', () => {
    const { state } = batch();
    state.started('a');
    state.started('b');
    state.promptBlocked('a', '403 key disabled');
    state.submitOutcome({ rowId: 'b', outcome: 'sent' }, 0);
    expect(state.pauseKind).toBe('key');
    const other = batch();
    other.state.recordingFailed('PathNotAllowed: /x is outside VIDBATCH_OUT_ROOT');
    expect(other.state.pausedReason).toMatch(
      /^finished rows could not be written to the manifest \(PathNotAllowed/,
    );
    const resumed: string[] = [];
    const withHook = new BatchState({ batchId: 'b', totalRows: 1, options: DEFAULT_BATCH_OPTIONS }, 0, {
      setState: () => {},
      unblock: () => {},
      resumed: () => resumed.push('resumed'),
    });
    withHook.recordingFailed('disk full');
    withHook.resume();
    expect(resumed).toEqual(['resumed']);
  });

  it('a row an earlier run ended submit_unknown is counted failed, not started', () => {
    const { state } = batch({ maxFailures: 1 }, 3);
    state.skipUnknown({ status: 'failed', errorCode: 'submit_unknown', generation: 0, posts: 1 });
    expect(state.progress(0)).toMatchObject({ started: 1, inFlight: 0, failed: 1, unknownSubmitRows: 1 });
    expect(state.stoppedReason).toBeNull(); // an earlier run's failure does not trip this run's guard rail
  });

  it('--max-submissions counts POSTs over the batch life: earlier runs, resends, first submits to come', () => {
    const { state } = batch({ maxSubmissions: 5 }, 10);
    state.skip({ status: 'succeeded', generation: 0, posts: 2 }); // an earlier run's submit and resend
    state.started('b', { generation: 0, jobId: 'vid_b', posts: 1 }); // checks its job first: no POST yet
    state.started('c'); // will POST: 2 + 1 + 1
    expect(state.stoppedReason).toBeNull();
    state.submitOutcome({ rowId: 'c', outcome: 'unknown', waiting: true }, 0);
    state.submitOutcome({ rowId: 'c', outcome: 'sent' }, 0); // its resend is one more
    state.finished(result('b', 'succeeded'));
    expect(state.stoppedReason).toBe('5 jobs submitted (--max-submissions 5)');
  });

  it('--max-submissions already spent by rows an earlier run finished starts no row at all', () => {
    const { state } = batch({ maxSubmissions: 2 }, 5);
    state.skip({ status: 'succeeded', generation: 0, posts: 1 });
    expect(state.stoppedReason).toBeNull();
    state.skipUnknown({ status: 'failed', errorCode: 'submit_unknown', generation: 0, posts: 1 });
    expect(state.stoppedReason).toBe('2 jobs submitted (--max-submissions 2)');
    expect(state.canStart(3, false)).toBe(false);
  });
});
