import { describe, expect, it } from 'vitest';
import { LatencyTracker } from '../../src/activities/latency';

/** A seeded uniform generator, so that these runs are the same every time. */
function uniform(seed: number): (a: number, b: number) => number {
  let x = seed;
  return (a, b) => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return a + ((x >>> 8) / 2 ** 24) * (b - a);
  };
}

/** Jobs one after another, each first checked when the tracker says (or at 30 s), plus a random delay. */
function runJobs(
  tracker: LatencyTracker,
  clock: { now: number },
  jobs: number,
  latency: () => number,
  delay: () => number,
  prefix: string,
) {
  for (let i = 0; i < jobs; i++) {
    const id = `${prefix}-${i}`;
    const age = (tracker.firstCheckAge(id) ?? 30_000) + delay();
    tracker.checked(id, age, latency() <= age);
    clock.now += 1000;
  }
}

describe('LatencyTracker', () => {
  it('knows nothing until twenty jobs have had a first check', () => {
    const clock = { now: 0 };
    const tracker = new LatencyTracker(() => clock.now);
    for (let i = 0; i < 19; i++) tracker.checked(`j${i}`, 50_000, true);
    expect(tracker.dueAge()).toBeUndefined();
    tracker.checked('j19', 50_000, true);
    clock.now += 2000; // past the one-second cache
    expect(tracker.dueAge()).toBe(50_000);
  });

  it('lets jobs submitted before anything is known wait for the estimate only when enough will teach it', () => {
    const clock = { now: 0 };
    // Job ids as gateways make them: opaque, not counting up.
    const id = (i: number) => `vid_${(Math.imul(i + 1, 2654435761) >>> 0).toString(16)}`;
    const small = new LatencyTracker(() => clock.now);
    for (let i = 0; i < 50; i++) small.submitted(id(i));
    // A fifth of 50 jobs is checked at the first poll: 10 first checks cannot make an estimate, so none waits.
    expect(Array.from({ length: 50 }, (_, i) => small.waitsForEstimate(id(i))).filter(Boolean)).toEqual([]);

    const large = new LatencyTracker(() => clock.now);
    for (let i = 0; i < 300; i++) large.submitted(id(i));
    const waiting = Array.from({ length: 300 }, (_, i) => large.waitsForEstimate(id(i)));
    // The others wait; a fifth is checked at the first poll.
    expect(waiting.filter(Boolean).length).toBeGreaterThan(225);
    expect(waiting.filter(Boolean).length).toBeLessThan(255);
    for (let i = 0; i < 300; i++) large.checked(id(i), 60_000, true);
    clock.now += 2000;
    expect(large.waitsForEstimate(id(1))).toBe(false); // known now: the estimate decides
  });

  it('does not take a few finished checks at the oldest ages for the 90% age', () => {
    const clock = { now: 0 };
    const tracker = new LatencyTracker(() => clock.now);
    // A large batch's first checks, at 35-54 s, of 40-80 s jobs: the three oldest happened to be finished.
    for (let i = 0; i < 20; i++) tracker.checked(`j${i}`, 35_000 + i * 1000, i >= 17);
    clock.now += 2000;
    // Three of three is no evidence that 90% are done by 52 s: go later than a job was last seen running.
    expect(tracker.dueAge()).toBe(51_000 * 1.25);
    // While the due age is a guess, no spare checks: a fit of such young checks puts half the jobs finished
    // at 52 s, where most were running.
    expect(tracker.dueIsGuess()).toBe(true);
    expect(tracker.spareCheckAge()).toBeUndefined();
    // A job first checked late (one that waited for the estimate) and found finished says nothing of later.
    tracker.checked('late', 90_000, true);
    clock.now += 2000;
    expect(tracker.dueAge()).toBe(51_000 * 1.25);
    // Ten finished in a row are evidence.
    for (let i = 20; i < 30; i++) tracker.checked(`j${i}`, 55_000 + i * 100, true);
    clock.now += 2000;
    expect(tracker.dueAge()).toBe(52_000);
    expect(tracker.dueIsGuess()).toBe(false);
    expect(tracker.spareCheckAge()).toBe(52_000);
  });

  it('counts only first checks: a slow job checked again does not move the estimate', () => {
    const clock = { now: 0 };
    const tracker = new LatencyTracker(() => clock.now);
    for (let i = 0; i < 30; i++) tracker.checked(`j${i}`, 50_000, i >= 2);
    tracker.checked('j0', 500_000, true); // second check of a slow one
    clock.now += 2000;
    expect(tracker.dueAge()).toBe(50_000);
  });

  it('estimates the 90th percentile of 40-80 s jobs from checks at any ages', () => {
    const clock = { now: 0 };
    const tracker = new LatencyTracker(() => clock.now);
    const u = uniform(1);
    for (let i = 0; i < 400; i++) {
      const age = u(30_000, 100_000);
      tracker.checked(`j${i}`, age, u(40_000, 80_000) <= age);
    }
    clock.now += 2000;
    expect(Math.abs(tracker.dueAge()! - 76_000)).toBeLessThan(5000);
    // Spare checks may start where the fit reaches half the jobs finished (60 s): after the first jobs
    // finish, and well before the due age.
    expect(tracker.spareCheckAge()!).toBeGreaterThan(55_000);
    expect(tracker.spareCheckAge()!).toBeLessThan(tracker.dueAge()! - 10_000);
  });

  it('finds the latency from the schedule upwards and stays there though checks run late', () => {
    const clock = { now: 0 };
    const tracker = new LatencyTracker(() => clock.now);
    const u = uniform(2);
    runJobs(
      tracker,
      clock,
      1500,
      () => u(40_000, 80_000),
      () => u(0, 10_000),
      'a',
    );
    const due = tracker.dueAge()!;
    expect(due).toBeGreaterThan(65_000);
    expect(due).toBeLessThan(90_000);
  });

  it('follows the gateway down when jobs get faster', () => {
    const clock = { now: 0 };
    const tracker = new LatencyTracker(() => clock.now);
    const u = uniform(3);
    runJobs(
      tracker,
      clock,
      1000,
      () => u(40_000, 80_000),
      () => u(0, 2000),
      'slow',
    );
    runJobs(
      tracker,
      clock,
      1500,
      () => u(10_000, 20_000),
      () => u(0, 2000),
      'fast',
    );
    expect(tracker.dueAge()!).toBeLessThan(30_000);
  });

  it('does not drift towards the deadline when a fifth of the jobs never finish', () => {
    const clock = { now: 0 };
    const tracker = new LatencyTracker(() => clock.now);
    const u = uniform(4);
    // 40-80 s jobs, and one in five answers "running" (or badly) for ever.
    runJobs(
      tracker,
      clock,
      2000,
      () => (u(0, 1) < 0.2 ? Infinity : u(40_000, 80_000)),
      () => u(0, 2000),
      'stuck',
    );
    const due = tracker.dueAge()!;
    console.log(`stuck jobs: first checks at ${Math.round(due / 1000)} s`);
    expect(due).toBeGreaterThan(60_000);
    // 90% of the jobs that finish are done by 76 s; before the plateau rule this was 70,735 s (1.25x the
    // latest first check, over and over).
    expect(due).toBeLessThan(100_000);
  });
});
