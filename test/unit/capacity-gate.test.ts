import { describe, expect, it } from 'vitest';
import type { BatchCarry } from '../../src/contract/batch';
import { DEFAULT_BATCH_OPTIONS } from '../../src/contract/batch-options';
import { BatchState } from '../../src/workflows/batch-state';
import { CAPACITY_RAMP } from '../../src/workflows/capacity-gate';
import { promptResult } from '../fixtures/prompt-result';

/** A batch with the capacity gate on; unblocks and timers are recorded, timers fired by hand. */
function gatedBatch(totalRows = 40, carry?: BatchCarry, now = 0) {
  const unblocked: string[] = [];
  const timers: { ms: number; fire: () => void }[] = [];
  const state = new BatchState(
    { batchId: 'batch-1', totalRows, options: { ...DEFAULT_BATCH_OPTIONS, concurrency: 500 }, carry },
    now,
    {
      setState: () => undefined,
      unblock: (rowId) => unblocked.push(rowId),
      timer: (ms, fire) => timers.push({ ms, fire }),
    },
  );
  state.enableCapacityGate(now);
  let next = 0;
  /** Starts prompts while the batch lets it; returns their ids. */
  const startAll = () => {
    const ids: string[] = [];
    while (state.canStart(1, false) && !state.allStarted()) {
      const id = `r${++next}`;
      state.started(id);
      ids.push(id);
    }
    return ids;
  };
  const sent = (id: string, now = 0) => state.submitOutcome({ rowId: id, outcome: 'sent' }, now);
  const refused = (id: string, retryAfterMs: number, now = 0) =>
    state.submitOutcome({ rowId: id, outcome: 'capacity', retryAfterMs, waiting: true }, now);
  const done = (id: string) => state.finished(promptResult(id, { status: 'succeeded' }));
  return { state, unblocked, timers, startAll, sent, refused, done };
}

describe('capacity gate (BatchState)', () => {
  it('before any refusal, starts prompts a few at a time: as many more as were sent', () => {
    const b = gatedBatch();
    expect(b.startAll()).toHaveLength(CAPACITY_RAMP);
    for (const id of ['r1', 'r2', 'r3']) b.sent(id);
    // 7 still waiting for their first answer; 10 may: 3 more start.
    expect(b.startAll()).toEqual(['r11', 'r12', 'r13']);
  });

  it('learns the cap at a refusal, starts nothing beyond it, and hands a slot out each time a job finishes', () => {
    const b = gatedBatch();
    const first = b.startAll(); // r1..r10
    for (const id of first.slice(0, 3)) b.sent(id); // the gateway caps running jobs at 3
    b.startAll(); // r11..r13 (ramp)
    for (const id of [...first.slice(3), 'r11', 'r12', 'r13']) b.refused(id, 20_000, 100);
    expect(b.state.capacityGate!.snapshot()).toMatchObject({ cap: 3, running: 3, waiting: 10 });
    expect(b.startAll()).toEqual([]);
    expect(b.state.progress(100).capacityGate).toMatch(
      /^capacity gate: 3 jobs running \(the gateway's cap, as seen at its last refusal: 3\), 10 rows waiting for a slot; next try without a finished job at 00:00:20 UTC$/,
    );
    // One probe timer for the herd, at the first Retry-After.
    expect(b.timers.map((t) => t.ms)).toEqual([20_000]);

    b.done('r1'); // a job finished: the first refused prompt goes
    expect(b.unblocked).toEqual(['r4']);
    b.done('r2');
    expect(b.unblocked).toEqual(['r4', 'r5']);
    b.sent('r4', 30_000);
    b.sent('r5', 30_000);
    expect(b.unblocked).toHaveLength(2); // full again: nobody else goes
    expect(b.startAll()).toEqual([]);
  });

  it('a probe slot after the Retry-After: when it goes through, the finish of the job it replaced frees nothing', () => {
    const b = gatedBatch();
    b.startAll();
    for (const id of ['r1', 'r2', 'r3']) b.sent(id, 0);
    for (const id of ['r4', 'r5']) b.refused(id, 10_000, 0);
    for (const id of ['r6', 'r7', 'r8', 'r9', 'r10']) b.refused(id, 10_000, 0);
    b.timers[0]!.fire(); // r1's job finished at the gateway; its prompt has not seen it yet
    expect(b.unblocked).toEqual(['r4']);
    b.sent('r4', 10_000);
    // The next probe at the pace submits went through: 3 in 10 s -> one every 3.3 s.
    expect(b.timers.map((t) => t.ms)).toEqual([10_000, 3333]);
    b.done('r1'); // r4 took its slot already: nothing handed out
    expect(b.unblocked).toEqual(['r4']);
    b.done('r2'); // a slot nobody took
    expect(b.unblocked).toEqual(['r4', 'r5']);
    // A probe that is refused measures the cap again and waits for the Retry-After it got.
    b.timers[1]!.fire();
    expect(b.unblocked).toEqual(['r4', 'r5', 'r6']);
    b.refused('r6', 7000, 13_333);
    expect(b.state.capacityGate!.snapshot()).toMatchObject({ cap: 2, waiting: 5, probeAt: 20_333 });
  });

  it('after the last waiting row and the last start, shows no gate; a cancelled waiting row leaves the queue', () => {
    const b = gatedBatch(12);
    b.startAll(); // r1..r10
    for (const id of ['r1', 'r2']) b.sent(id);
    b.startAll(); // r11, r12: all started
    for (const id of ['r3', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9', 'r10', 'r11', 'r12']) b.refused(id, 5000);
    expect(b.state.progress(0).capacityGate).toContain('10 rows waiting');
    for (const id of ['r3', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9', 'r10', 'r11']) b.done(id); // cancelled
    expect(b.unblocked).toEqual([]);
    b.done('r1');
    expect(b.unblocked).toEqual(['r12']);
    expect(b.state.progress(0).capacityGate).toBeNull();
  });

  it('a more jobs going through than the refusal saw raises the cap (a late report)', () => {
    const b = gatedBatch();
    b.startAll();
    b.sent('r1');
    b.refused('r3', 5000);
    b.sent('r2');
    expect(b.state.capacityGate!.snapshot().cap).toBe(2);
  });

  it('without the gate, a capacity report lets the prompt go on at once', () => {
    const unblocked: string[] = [];
    const state = new BatchState({ batchId: 'b', totalRows: 3, options: DEFAULT_BATCH_OPTIONS }, 0, {
      setState: () => undefined,
      unblock: (r) => unblocked.push(r),
    });
    state.started('r1');
    state.submitOutcome({ rowId: 'r1', outcome: 'capacity', retryAfterMs: 5000, waiting: true }, 0);
    expect(unblocked).toEqual(['r1']);
    expect(state.progress(0).capacityGate).toBeNull();
  });
});

describe('capacity gate: short Retry-Afters and refusals with nothing running', () => {
  it('before the gate, a short Retry-After is a rate limit: the row goes again after it; a capacity refusal then queues it', () => {
    const b = gatedBatch();
    b.startAll();
    b.sent('r1');
    b.refused('r2', 1000, 0); // 1 s: a request rate limit
    expect(b.state.progress(0).holdUntil).toBe(1000);
    expect(b.timers.map((t) => t.ms)).toEqual([1000]);
    b.timers[0]!.fire();
    expect(b.unblocked).toEqual(['r2']);
    b.refused('r3', 1000, 10);
    b.refused('r4', 9000, 20); // a capacity refusal: r3 no longer goes by its own timer
    b.timers[1]!.fire();
    expect(b.unblocked).toEqual(['r2']);
    expect(b.state.capacityGate!.snapshot()).toMatchObject({ cap: 1, waiting: 2 });
  });

  it('a probe that goes through when no job of the batch could have freed its slot raises the cap', () => {
    const b = gatedBatch();
    b.startAll();
    for (const id of ['r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9', 'r10']) b.refused(id, 5000, 0);
    expect(b.state.capacityGate!.snapshot()).toMatchObject({ cap: 0, waiting: 10 });
    b.timers[0]!.fire();
    b.sent('r1', 5000);
    expect(b.state.capacityGate!.snapshot()).toMatchObject({ cap: 1, running: 1 });
  });

  it('goes with the window across continue-as-new: the cap, the queue and the probe timer', () => {
    const b = gatedBatch();
    const first = b.startAll(); // r1..r10
    for (const id of first.slice(0, 3)) b.sent(id);
    for (const id of first.slice(3)) b.refused(id, 20_000, 100);
    const carry = b.state.carry([]);
    const next = gatedBatch(40, carry, 5000);
    expect(next.state.capacityGate!.snapshot()).toEqual(b.state.capacityGate!.snapshot());
    expect(next.state.progress(5000)).toMatchObject({ inFlight: 10 });
    // The probe timer is set again for what is left of the Retry-After.
    expect(next.timers.map((t) => t.ms)).toEqual([20_100 - 5000]);
    // A job that finishes under the next run hands its slot to the first row refused.
    next.done('r1');
    expect(next.unblocked).toEqual(['r4']);
    expect(next.startAll()).toEqual([]);
  });
});
