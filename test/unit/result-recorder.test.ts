import { describe, expect, it } from 'vitest';
import type { PromptResult } from '../../src/contract/prompt';
import { ResultRecorder, takeGroup, utf8Length } from '../../src/workflows/result-recorder';
import { promptResult } from '../fixtures/prompt-result';

function result(rowId: string): PromptResult {
  return promptResult(rowId);
}

/** A recorder whose groups are recorded by hand: each call waits until `settle` is called. */
function recorder(inFlight = 5) {
  const clock = { now: 0 };
  const groups: { rows: string[]; settle: (ok: boolean) => void }[] = [];
  const recorded: string[] = [];
  const r = new ResultRecorder(
    (results) =>
      new Promise((resolve, reject) =>
        groups.push({
          rows: results.map((x) => x.rowId),
          settle: (ok) => (ok ? resolve({ manifestPath: '/m' }) : reject(new Error('disk full'))),
        }),
      ),
    {
      inFlight: () => inFlight,
      onRecorded: (p) => recorded.push(p),
      changed: () => {},
      now: () => clock.now,
    },
  );
  return { r, groups, recorded, clock };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('ResultRecorder', () => {
  it('groups rows until 25 are pending or 10 s passed, one group at a time', async () => {
    const { r, groups, clock, recorded } = recorder();
    for (let i = 0; i < 24; i++) r.add(result(`r${i}`));
    expect(groups).toHaveLength(0);
    r.add(result('r24'));
    expect(groups).toHaveLength(1);
    expect(groups[0]!.rows).toHaveLength(25);
    clock.now = 20_000;
    r.add(result('late'));
    expect(groups).toHaveLength(1); // the first group is still being recorded
    groups[0]!.settle(true);
    await tick();
    expect(recorded).toEqual(['/m']);
    expect(groups[1]!.rows).toEqual(['late']);
    groups[1]!.settle(true);
    await tick();
    expect(r.idle).toBe(true);
  });

  it('records at once when nothing else is in flight, and on force', () => {
    const idle = recorder(0);
    idle.r.add(result('a'));
    expect(idle.groups).toHaveLength(1);
    const busy = recorder();
    busy.r.add(result('a'));
    expect(busy.groups).toHaveLength(0);
    busy.r.flush(true);
    expect(busy.groups).toHaveLength(1);
  });

  it('puts a failed group back in front of what came since', async () => {
    const { r, groups } = recorder();
    r.add(result('a'));
    r.flush(true);
    r.add(result('b'));
    groups[0]!.settle(false);
    await tick();
    expect(r.idle).toBe(false);
    r.flush(true);
    expect(groups[1]!.rows).toEqual(['a', 'b']);
  });

  it('records the rest in one last group after a cancellation', async () => {
    const { r, groups } = recorder();
    r.add(result('a'));
    r.add(result('b'));
    const rest = r.recordRest('record rows finished before the cancellation');
    expect(groups[0]!.rows).toEqual(['a', 'b']);
    groups[0]!.settle(true);
    await rest;
    expect(r.idle).toBe(true);
  });

  it('cuts groups by JSON size (spend-safety), at least one result each', () => {
    const big = (id: string) => ({ ...result(id), prompt: 'é'.repeat(100_000) }); // ~200 KB of UTF-8
    const pending = ['a', 'b', 'c', 'd', 'e'].map(big);
    const first = takeGroup(pending, 512 * 1024);
    expect(first.map((r) => r.rowId)).toEqual(['a', 'b']);
    expect(utf8Length(JSON.stringify(first))).toBeLessThanOrEqual(512 * 1024);
    expect(takeGroup(pending, 10).map((r) => r.rowId)).toEqual(['c']);
    expect(takeGroup(pending, undefined).map((r) => r.rowId)).toEqual(['d', 'e']);
    expect(utf8Length('aé€😀')).toBe(Buffer.byteLength('aé€😀'));
  });

  it('with a timer, flushes a pending group 10 s after the last one though no other row finishes', async () => {
    const clock = { now: 0 };
    const timers: { ms: number; fire: () => void }[] = [];
    const groups: string[][] = [];
    const r = new ResultRecorder(
      (results) => {
        groups.push(results.map((x) => x.rowId));
        return Promise.resolve({ manifestPath: '/m' });
      },
      {
        inFlight: () => 5,
        onRecorded: () => {},
        changed: () => {},
        now: () => clock.now,
        timer: (ms) => new Promise((resolve) => timers.push({ ms, fire: () => resolve() })),
      },
    );
    clock.now = 4000;
    r.add(result('a'));
    r.add(result('b'));
    expect(groups).toEqual([]);
    expect(timers.map((t) => t.ms)).toEqual([6000]); // one timer, due 10 s after the last flush
    clock.now = 10_000;
    timers[0]!.fire();
    await tick();
    expect(groups).toEqual([['a', 'b']]);
  });

  it('reports a group that failed for good, and records it again only after retry()', async () => {
    const failures: string[] = [];
    let ok = false;
    const groups: string[][] = [];
    const r = new ResultRecorder(
      (results) => {
        groups.push(results.map((x) => x.rowId));
        const cause = new Error('/x is outside VIDBATCH_OUT_ROOT');
        return ok
          ? Promise.resolve({ manifestPath: '/m' })
          : Promise.reject(new Error('Activity task failed', { cause }));
      },
      {
        inFlight: () => 0,
        onRecorded: () => {},
        changed: () => {},
        failed: (m) => failures.push(m),
      },
    );
    r.add(result('a'));
    await tick();
    expect(failures).toEqual(['/x is outside VIDBATCH_OUT_ROOT']);
    r.add(result('b'));
    expect(groups).toHaveLength(1); // nothing goes before retry()
    ok = true;
    r.retry();
    await tick();
    expect(groups[1]).toEqual(['a', 'b']);
    expect(r.idle).toBe(true);
  });

  it('does not report a group cancelled with the run: recordRest records it, and no pause is asked for', async () => {
    const failures: string[] = [];
    const groups: string[][] = [];
    let cancelled = true;
    const r = new ResultRecorder(
      (results) => {
        groups.push(results.map((x) => x.rowId));
        const cause = Object.assign(new Error('Activity cancelled'), { name: 'CancelledFailure' });
        return cancelled
          ? Promise.reject(new Error('Activity task failed', { cause }))
          : Promise.resolve({ manifestPath: '/m' });
      },
      { inFlight: () => 0, onRecorded: () => {}, changed: () => {}, failed: (m) => failures.push(m) },
    );
    r.add(result('a'));
    await tick();
    expect(failures).toEqual([]);
    cancelled = false;
    await r.recordRest('record rows finished before the cancellation');
    expect(groups).toEqual([['a'], ['a']]);
  });
});
