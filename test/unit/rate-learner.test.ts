import { describe, expect, it } from 'vitest';
import type { RateReport } from '../../src/contract/rate-budget';
import { INITIAL_RATE, RateLearner } from '../../src/workflows/rate-learner';

const report = (over: Partial<RateReport> = {}): RateReport => ({
  worker: 'w1',
  dispatched: 0,
  answered: { submit: 0, status: 0 },
  rateLimited: { submit: 0, status: 0 },
  retryAfterMs: 0,
  ...over,
});

/** A 429 reported at `at`, with a 1 s Retry-After. */
const refusedAt = (learner: RateLearner, at: number) =>
  learner.report(at, report({ rateLimited: { submit: 1, status: 0 }, retryAfterMs: 1000 }));

/** A learner at 4 rps in force, cut to 3.6 by a 429 at `now` + 10 ms (its ceiling 4). */
function cutFrom4(now: number): RateLearner {
  const learner = new RateLearner(now, undefined, { initialRate: 4 });
  learner.applied(now - 5000, 4);
  learner.report(now, report({ dispatched: 4, answered: { submit: 4, status: 0 } }));
  refusedAt(learner, now + 10);
  return learner;
}

/**
 * A backlogged gateway queue limited at what the learner applies (taking effect 150 ms later, as measured), the
 * gateway a token bucket (rate, burst = rate) answering 429 with Retry-After 1 s, `workers` workers each
 * reporting once a second (at once on a 429) and holding their own calls for a Retry-After. The learner's
 * workflow loop is modelled too: it applies a new target at most once a second, a hold or its end at once.
 */
function simulate(opts: {
  gatewayRps: number;
  seconds: number;
  workers?: number;
  learner?: RateLearner;
  start?: number;
}) {
  const workers = opts.workers ?? 1;
  const step = 10;
  let now = opts.start ?? 1_000_000;
  const learner = opts.learner ?? new RateLearner(now);
  let applied = learner.target(now);
  let appliedAt = now;
  learner.applied(now, applied);
  const pending: { at: number; rps: number }[] = [];
  let queueRps = applied;
  let queueTokens = 0;
  let gwTokens = opts.gatewayRps;
  const held = Array.from({ length: workers }, () => 0);
  const acc = Array.from({ length: workers }, () => report());
  const lastFlush = Array.from({ length: workers }, () => now);
  let sent = 0;
  let limited = 0;
  let next = 0;
  const flush = (w: number) => {
    learner.report(now, { ...acc[w]!, worker: `w${w}` });
    acc[w] = report();
    lastFlush[w] = now;
  };
  for (const end = now + opts.seconds * 1000; now < end; now += step) {
    // The server applies limits 150 ms after the call (`bench/queue-limit-probe.ts change`).
    while (pending.length > 0 && pending[0]!.at <= now) queueRps = pending.shift()!.rps;
    queueTokens = Math.min(Math.max(1, Math.ceil(queueRps)), queueTokens + (queueRps * step) / 1000);
    gwTokens = Math.min(opts.gatewayRps, gwTokens + (opts.gatewayRps * step) / 1000);
    while (queueTokens >= 1) {
      queueTokens -= 1;
      const w = next++ % workers;
      acc[w]!.dispatched += 1;
      if (now < held[w]!) continue; // waits in the worker's pacer: sent later, rarely matters here
      sent += 1;
      if (gwTokens >= 1) {
        gwTokens -= 1;
        acc[w]!.answered.status += 1;
      } else {
        limited += 1;
        acc[w]!.rateLimited.status += 1;
        acc[w]!.retryAfterMs = 1000;
        held[w] = now + 1000;
        flush(w);
      }
    }
    for (let w = 0; w < workers; w++) if (now - lastFlush[w]! >= 1000) flush(w);
    learner.grow(now);
    const target = learner.target(now);
    if (target !== applied && (now - appliedAt >= 1000 || target === 0 || applied === 0)) {
      applied = target;
      appliedAt = now;
      learner.applied(now, target);
      pending.push({ at: now + 150, rps: target });
    }
  }
  return { sent, limited, rate: sent / opts.seconds, learner };
}

describe('RateLearner', () => {
  it('doubles the limit per second while the workers fill it, and not while idle', () => {
    let now = 0;
    const learner = new RateLearner(now, undefined, { initialRate: 2 });
    learner.applied(now, 2);
    for (let i = 0; i < 5; i++) {
      now += 1000;
      learner.grow(now);
    }
    expect(learner.target(now)).toBe(2);
    // Reports of what the limit in force (the one applied a second earlier) let through.
    let inForce = 2;
    for (let i = 0; i < 3; i++) {
      now += 1000;
      const n = Math.floor(inForce);
      learner.report(now, report({ dispatched: n, answered: { submit: 0, status: n } }));
      inForce = learner.target(now);
      learner.applied(now, inForce);
    }
    expect(learner.target(now)).toBeGreaterThanOrEqual(8);
    expect(learner.target(now)).toBeLessThanOrEqual(16);
  });

  it('does not grow on dispatches that send nothing (calls held by a worker for a Retry-After)', () => {
    for (const [options, grows] of [[{}, false]] as const) {
      let now = 0;
      const learner = new RateLearner(now, undefined, { ...options, initialRate: 4 });
      learner.applied(now, 4);
      for (let i = 0; i < 5; i++) {
        now += 1000;
        learner.report(now, report({ dispatched: 4 })); // dispatched, waiting in the worker: no request
      }
      expect(learner.target(now) > 4).toBe(grows);
    }
  });

  it('finds a 5 rps limit with few 429s and uses most of it, then holds it for minutes', () => {
    const { limited, rate, learner } = simulate({ gatewayRps: 5, seconds: 300 });
    expect(limited).toBeLessThanOrEqual(12);
    expect(rate).toBeGreaterThan(0.85 * 5);
    expect(learner.state.ceiling).toBeGreaterThan(4.5);
    expect(learner.state.ceiling).toBeLessThan(7);
  });

  it('does the same with three workers reporting separately', () => {
    const { limited, rate } = simulate({ gatewayRps: 3, seconds: 120, workers: 3 });
    expect(limited).toBeLessThanOrEqual(12);
    expect(rate).toBeGreaterThan(0.8 * 3);
  });

  it('cuts the limit on a short Retry-After without holding the queue', () => {
    const now = 10_000;
    for (const [options, held] of [
      [{ holdShortRetryAfter: true }, true],
      [{}, false],
    ] as const) {
      const learner = new RateLearner(now, undefined, { ...options, initialRate: 4 });
      learner.applied(now - 5000, 4);
      learner.report(now, report({ dispatched: 12, answered: { submit: 6, status: 5 } }));
      learner.report(now + 10, report({ rateLimited: { submit: 1, status: 0 }, retryAfterMs: 1000 }));
      expect(learner.target(now + 20) === 0).toBe(held);
      expect(learner.target(now + 1010)).toBeCloseTo(3.6, 5); // 0.9 x the 4 rps in force
    }
  });

  it('holds the queue at 0 for a long Retry-After that status checks get too, then applies the cut limit', () => {
    const now = 10_000;
    const learner = new RateLearner(now, undefined, { initialRate: 4 });
    learner.applied(now - 5000, 4);
    learner.report(now, report({ dispatched: 12, answered: { submit: 6, status: 5 } }));
    learner.report(now + 10, report({ rateLimited: { submit: 1, status: 1 }, retryAfterMs: 8000 }));
    expect(learner.target(now + 20)).toBe(0);
    expect(learner.nextChangeAt(now + 20)).toBe(now + 8010);
    expect(learner.target(now + 8010)).toBeCloseTo(3.6, 5);
  });

  it('settles at 0.9 of a ceiling a probe confirmed too, and stays quiet twice as long', () => {
    let now = 10_000;
    const learner = new RateLearner(now, undefined, { initialRate: 5 });
    learner.applied(now - 5000, 5);
    const hit = () => {
      learner.report(now, report({ dispatched: 5, answered: { submit: 2, status: 3 } }));
      learner.report(now + 10, report({ rateLimited: { submit: 0, status: 1 }, retryAfterMs: 1000 }));
    };
    hit();
    expect(learner.state.limit).toBeCloseTo(4.5, 5);
    expect(learner.state.plateauMs).toBe(5000);
    // Back at 5 rps a while later (a probe), the same wall again: confirmed.
    for (let t = 0; t < 60; t++) {
      now += 1000;
      learner.report(now, report({ dispatched: 5, answered: { submit: 2, status: 3 } }));
    }
    expect(learner.state.limit).toBeCloseTo(5.5, 5); // the probe's cap, 10% over the ceiling
    learner.applied(now - 5000, 5);
    hit();
    expect(learner.state.confirmations).toBe(1);
    // The gateway refused at 5 rps: its rate may be a little under that, so 95% of it could still be over.
    expect(learner.state.limit).toBeCloseTo(4.5, 5);
    expect(learner.state.plateauMs).toBe(10_000);
  });

  it('a 429 on the plateau of a cut (no probe since) cuts to what the gateway answered, unconfirmed', () => {
    let now = 10_000;
    // The first 429: the ceiling is the rate in force (4), the limit 0.9 of it.
    const learner = cutFrom4(now);
    expect(learner.state.ceiling).toBeCloseTo(4, 5);
    expect(learner.state.limit).toBeCloseTo(3.6, 5);
    // 3 s later, still on its plateau at 3.6 (applied), a 429 again while the gateway answered 3 a second: the
    // ceiling was read high. It drops to the answered rate at once, not by 5% as a confirmation would.
    learner.applied(now + 100, 3.6);
    for (let t = 1; t <= 3; t++) {
      now += 1000;
      learner.report(now, report({ dispatched: 3.6, answered: { submit: 3, status: 0 } }));
    }
    refusedAt(learner, now + 10);
    expect(learner.state.confirmations).toBe(0);
    expect(learner.state.ceiling).toBeLessThanOrEqual(3.1);
    expect(learner.state.limit).toBeLessThanOrEqual(0.9 * 3.1);
  });

  it('reads a burst after idle seconds at the rate in force, not at the demand averaged over them', () => {
    const start = 10_000;
    const learner = cutFrom4(start);
    learner.applied(start + 100, 3.6);
    // Still on the plateau of that cut: a second with one check, an idle one, then five calls within a second
    // (due checks that came at once), the last refused. The window's average is 2 requests/s, under the
    // limit's 70%; what the gateway answered in it, 1.7 a second, is demand, not the gateway's rate.
    const burst = start + 4000;
    learner.report(burst - 2000, report({ dispatched: 1, answered: { submit: 0, status: 1 } }));
    learner.report(burst, report({ dispatched: 4, answered: { submit: 0, status: 4 } }));
    refusedAt(learner, burst + 10);
    expect(learner.state.cutAt).toBe(burst + 10);
    // Cut from 3.6, where the limit sat (read at 2 or 1.7, it went to 1.5 against a gateway that took 4).
    expect(learner.state.limit).toBeCloseTo(0.9 * 3.6, 5);
  });

  it('cuts again on a 429 more than a second after a cut, not on one within it', () => {
    let now = 10_000;
    const learner = cutFrom4(now);
    expect(learner.state.limit).toBeCloseTo(3.6, 5);
    learner.applied(now + 100, 3.6);
    // 0.9 s after the cut: a call sent before it applied, or held out the Retry-After in a worker.
    refusedAt(learner, now + 910);
    expect(learner.state.limit).toBeCloseTo(3.6, 5);
    // 1.2 s after it, 3.6 governing the queue for a second: still over the gateway's limit.
    now += 1000;
    learner.report(now, report({ dispatched: 3.6, answered: { submit: 3, status: 0 } }));
    refusedAt(learner, now + 200);
    expect(learner.state.cutAt).toBe(now + 200);
    expect(learner.state.limit).toBeLessThan(3.3);
  });

  it('never raises the limit on the plateau, though the cut was written too late to count as in force', () => {
    let now = 10_000;
    const learner = cutFrom4(now);
    expect(learner.state.limit).toBeCloseTo(3.6, 5);
    // The write of 3.6 lands 1.5 s later (a busy server); 2.1 s after the cut the gateway refuses again while
    // it answered 4.4 a second: the rate "in force" is still 4, and a cut from it must not land above 3.6.
    learner.applied(now + 1500, 3.6);
    for (let t = 1; t <= 2; t++) {
      now += 1000;
      learner.report(now, report({ dispatched: 4, answered: { submit: 4.4, status: 0 } }));
    }
    refusedAt(learner, now + 100);
    expect(learner.state.cutAt).toBe(now + 100);
    expect(learner.state.limit).toBeLessThanOrEqual(3.6);
  });

  it('does not cut on submissions refused with a long Retry-After while status checks are answered', () => {
    const now = 10_000;
    const learner = new RateLearner(now, undefined, { initialRate: 4 });
    learner.applied(now - 5000, 4);
    learner.report(now, report({ dispatched: 4, answered: { submit: 1, status: 3 } }));
    learner.report(now + 10, report({ rateLimited: { submit: 2, status: 0 }, retryAfterMs: 15_000 }));
    expect(learner.target(now + 20)).toBeGreaterThanOrEqual(4);
    // The same refusal on a status check is a rate limit.
    learner.report(now + 30, report({ rateLimited: { submit: 0, status: 1 }, retryAfterMs: 15_000 }));
    expect(learner.target(now + 40)).toBe(0);
  });

  it('does not hold status checks for submissions refused at the start, before any check', () => {
    const now = 10_000;
    for (const [options, held] of [[{}, false]] as const) {
      const learner = new RateLearner(now, undefined, { ...options, initialRate: 4 });
      learner.applied(now - 5000, 4);
      learner.report(now, report({ dispatched: 12, answered: { submit: 10, status: 0 } }));
      learner.report(now + 10, report({ rateLimited: { submit: 2, status: 0 }, retryAfterMs: 25_000 }));
      expect(learner.target(now + 20) === 0).toBe(held);
    }
  });

  it('keeps a pinned limit: holds for a long Retry-After, never learns', () => {
    const now = 10_000;
    const learner = new RateLearner(now);
    learner.pin(7);
    learner.applied(now - 5000, 7);
    learner.report(
      now,
      report({ dispatched: 30, rateLimited: { submit: 0, status: 1 }, retryAfterMs: 3000 }),
    );
    expect(learner.target(now + 1)).toBe(0);
    expect(learner.target(now + 3001)).toBe(7);
    learner.pin(null);
    expect(learner.target(now + 3001)).toBe(INITIAL_RATE); // the learned limit: still the initial one
  });

  it('corrects an early ceiling set too low: a probe that hits higher raises it', () => {
    // Three workers against 5 rps: over five minutes the learner ends near the gateway's limit.
    const run = simulate({ gatewayRps: 5, seconds: 300, workers: 3 });
    expect(run.learner.state.ceiling).toBeGreaterThan(4.5);
    expect(run.rate).toBeGreaterThan(0.85 * 5);
  });

  it('probes at most 10% over a known ceiling, so a probe costs a 429 or two', () => {
    const learner = new RateLearner(1_000_000);
    const applied: number[] = [];
    const apply = learner.applied.bind(learner);
    learner.applied = (now, rps) => {
      if (learner.state.ceiling !== undefined && rps > 0) applied.push(rps / learner.state.ceiling);
      apply(now, rps);
    };
    const { limited } = simulate({ gatewayRps: 5, seconds: 300, learner });
    expect(Math.max(...applied)).toBeLessThanOrEqual(1.1 + 0.005 / 4); // limits are applied to 0.01 rps
    expect(limited).toBeLessThanOrEqual(8);
  });

  it('follows a gateway that raises its limit: a probe held at its cap without a 429 moves the ceiling up', () => {
    const learner = new RateLearner(0, {
      limit: 4.75,
      ceiling: 5,
      cutAt: 0,
      plateauMs: 5000,
      confirmations: 2,
      holdUntil: 0,
      pinned: null,
    });
    const { learner: after } = simulate({ gatewayRps: 8, seconds: 120, learner, start: 10_000 });
    expect(after.state.ceiling).toBeGreaterThan(7);
  });

  it('raises a ceiling only on evidence: a probe held at its cap that the workers never sent over it stays', () => {
    const learner = new RateLearner(0, {
      limit: 4.75,
      ceiling: 5,
      cutAt: 0,
      plateauMs: 5000,
      confirmations: 1,
      holdUntil: 0,
      pinned: null,
    });
    learner.applied(0, 4.75);
    // Demand of 4.5 requests a second for two minutes: enough to fill 70% of the limit, so the probe grows it
    // to its cap (5.5), never more than the ceiling itself. No 429 comes, and none would tell anything.
    for (let now = 1000; now <= 120_000; now += 1000) {
      learner.report(now, report({ dispatched: 4.5, answered: { submit: 0, status: 4.5 } }));
      if (now % 2000 === 0) learner.applied(now, learner.target(now));
    }
    expect(learner.target(120_000)).toBeCloseTo(5.5, 1);
    expect(learner.state.ceiling).toBe(5);
  });

  it('carries its state: a learner built from it wants the same limit and keeps learning from there', () => {
    const first = simulate({ gatewayRps: 4, seconds: 60 });
    const state = JSON.parse(JSON.stringify(first.learner.state)) as typeof first.learner.state;
    const second = new RateLearner(0, state);
    expect(second.target(0)).toBe(first.learner.target(0));
    const { limited, rate } = simulate({ gatewayRps: 4, seconds: 60, learner: second, start: 1_060_000 });
    expect(limited).toBeLessThanOrEqual(4);
    expect(rate).toBeGreaterThan(0.8 * 4);
  });
});
