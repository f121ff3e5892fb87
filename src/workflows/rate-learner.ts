// The gateway limit learning of the rate-budget workflow, as a pure class (no Temporal calls, time passed in),
// so it can be unit-tested and its state carried across continue-as-new. It sets the one queue limit all
// workers share:
// - slow start from 4 rps: the limit doubles per second while the workers' requests fill it;
// - on the first 429: ceiling = the rate the gateway answered over the last few seconds (slow start's limits
//   climb too fast for the one in force to say), limit = 0.9 x ceiling;
// - on a later 429 (once per episode): a 429 at or over the ceiling confirms it; one under it is a new, lower
//   ceiling (the lowest limit in force over the last few seconds, or the workers' request rate if lower; on the
//   plateau of a cut, no probe since, the rate the gateway answered if lower still, never a confirmation);
//   limit = 0.9 x ceiling, never above the limit before the 429;
// - after a quiet plateau, probe upwards, faster and faster, but at most 10% over the ceiling; a probe held
//   there 10 s with the workers sending over the ceiling and no 429 raises the ceiling to it. The plateau
//   doubles each time a 429 confirms the ceiling (a steady limit costs few 429s), and is short again when the
//   limit moved.
// A 429 on submissions alone, with a long Retry-After, no status check refused, is not a request-rate limit
// (the gateway caps running jobs or a quota): it does not cut the rate nor hold status checks; the prompts
// wait out their own Retry-After. That reading is an assumption: the spec shows no 429 codes.
// With `holdShortRetryAfter: false`, only a long Retry-After that status checks get too (a gateway-wide pause)
// holds the whole queue at 0; a short one (the usual token-bucket 429) only cuts the limit, and the refused
// calls wait their own Retry-After in the worker (not the default yet, see the constructor).
import { parseReason, type QueueLimit } from '../contract/limit-reason';
import type { LearnerState, RateReport } from '../contract/rate-budget';

export interface LearnerOptions {
  /** Requests/second before anything is known. */
  initialRate?: number;
  /** Upper bound (a gateway without limits). */
  maxRate?: number;
  /** Shortest quiet plateau after a cut before probing (default 5 s). */
  plateauMs?: number;
  /** The limit after a 429, as a share of the rate at which it hit (default 0.9). */
  cut?: number;
  /** Fastest growth per second while probing (x). */
  probeMax?: number;
  /** Hold the queue at 0 for every 429's Retry-After, however short; else (default) only a long one. */
  holdShortRetryAfter?: boolean;
}

/** Requests/second before anything is known (slow start's first step; the watchdog's limit for a new queue). */
export const INITIAL_RATE = 4;
const SLOW_START = 2; // x per saturated second until the first 429
// Probing: +5% per saturated second at first, 2 points more each second (at most `probeMax`): growth is written
// at most once a second and the gateway's burst hides an overshoot for a while, so a faster probe overshoots far.
const PROBE_START = 0.05;
const PROBE_ACCEL = 0.02;
const SAME_CEILING = 0.15; // a new ceiling this close to the last one confirms it
// A probe goes at most this far over the ceiling, and stays there PROBE_HOLD_MS before the ceiling moves up to
// it: a probe that grew on would overshoot far before its 429 is seen (the gateway's burst hides it).
const PROBE_ABOVE = 1.1;
const PROBE_HOLD_MS = 10_000;
const MAX_PLATEAU_MS = 120_000;
export const MIN_RATE = 0.1;
// 429s this soon after a cut answer requests dispatched before it took effect, or held out a 1 s Retry-After
// in a worker; a later one says the cut limit is over the gateway's too (waiting 2 s left a limit that was
// over it in force for another 429 each second).
const SAME_EPISODE_MS = 1000;
const WINDOW_MS = 3000; // dispatch rates are measured over this long
const SATURATED = 0.7; // dispatches at this share of the limit in force mean the limit binds
// A new queue limit governs dispatches within about 150 ms of the call (`bench/queue-limit-probe.ts change`).
const TAKES_EFFECT_MS = 250;
/** Workers report at most this often (and at once on a 429). */
export const REPORT_INTERVAL_MS = 1000;
// A submit-only 429 with a longer Retry-After reads as a capacity cap; one that status checks get too, as a
// gateway-wide pause (the queue is held); a shorter one as a token bucket's (the limit is cut, not held).
const LONG_RETRY_AFTER_MS = 2000;

/** Requests a report says the worker sent: answered or 429. */
function sent(r: RateReport): number {
  return r.answered.submit + r.answered.status + r.rateLimited.submit + r.rateLimited.status;
}

interface Arrival {
  at: number;
  report: RateReport;
}

export class RateLearner {
  readonly state: LearnerState;
  private readonly arrivals: Arrival[] = [];
  /** Limits applied to the server and when, to know which one was in force at a time. */
  private readonly appliedLog: { at: number; rps: number }[] = [];
  private grownAt: number;
  /** Since when a probe has held the limit at its cap with the queue full (not carried: a probe starts over). */
  private atCapSince: number | undefined;
  private readonly minPlateauMs: number;
  private readonly maxRate: number;
  private readonly cut: number;
  private readonly probeMax: number;
  private readonly holdShortRetryAfter: boolean;
  /** 429s seen by this run (not carried; for the snapshot). */
  rateLimited = 0;
  reports = 0;

  constructor(now: number, state?: LearnerState, options: LearnerOptions = {}) {
    this.minPlateauMs = options.plateauMs ?? 5000;
    this.maxRate = options.maxRate ?? 1000;
    this.cut = options.cut ?? 0.9;
    // A probe grows the limit by at most 10% a second. A 429 comes seconds after the limit that drew it (the
    // gateway's burst hides an overshoot for a while), so a fast probe overshoots far, and its 429 reads as a
    // new, higher ceiling.
    this.probeMax = options.probeMax ?? 1.1;
    // A short Retry-After (a token bucket's 429) only cuts; the refused calls wait it out in their worker,
    // per kind (gateway/retry-after-hold.ts), while the rest of the queue goes on at the cut rate.
    this.holdShortRetryAfter = options.holdShortRetryAfter ?? false;
    this.state = state ?? initialState(options);
    this.grownAt = now;
  }

  /** The limit the queue should have now: 0 during a hold, else the pinned or learned one. */
  target(now: number): number {
    if (now < this.state.holdUntil) return 0;
    return round(this.state.pinned ?? this.state.limit);
  }

  /** When the target may change without a report: the end of a hold, or the next growth step. */
  nextChangeAt(now: number): number | undefined {
    if (now < this.state.holdUntil) return this.state.holdUntil;
    if (this.state.pinned === null && this.lastArrival() > now - WINDOW_MS) return now + 1000;
    return undefined;
  }

  /** An operator's pin, or (`by: 'gateway'`) the gateway's published limit, which never replaces an operator's. */
  pin(rps: number | null, by?: 'gateway'): void {
    const s = this.state;
    if (by === 'gateway' && s.pinned !== null && s.pinnedBy === undefined) return;
    s.pinned = rps === null ? null : Math.max(0, rps);
    if (s.pinned !== null && by === 'gateway') {
      // Learned as well: the queue's reason carries it, not the pin, so a new learner starts from it and the
      // gateway's next answer pins it again.
      s.pinnedBy = 'gateway';
      s.limit = Math.max(MIN_RATE, s.pinned);
    } else delete s.pinnedBy;
  }

  applied(now: number, rps: number): void {
    this.appliedLog.push({ at: now, rps });
    while (this.appliedLog.length > 2 && this.appliedLog[1]!.at < now - 4 * WINDOW_MS)
      this.appliedLog.shift();
  }

  /** Dispatches per second over the last few seconds, all workers together. */
  dispatchRate(now: number): number {
    return this.rateOf(now, (r) => r.dispatched);
  }

  /**
   * What binds the limit: requests the workers sent (answered or 429), not dispatches: while workers hold
   * calls for a Retry-After, dispatches wait and send nothing.
   */
  private sendingRate(now: number): number {
    return this.rateOf(now, sent);
  }

  /**
   * Requests sent in the busiest second of the window (the reports that arrived within a second of each other).
   * After idle seconds, a burst draws a 429 while the window's average sits far under the limit.
   */
  private peakSendingRate(now: number): number {
    const recent = this.arrivals.filter((a) => a.at > now - WINDOW_MS);
    let peak = 0;
    for (const end of recent) {
      let n = 0;
      for (const a of recent) if (a.at > end.at - REPORT_INTERVAL_MS && a.at <= end.at) n += sent(a.report);
      peak = Math.max(peak, n);
    }
    return peak / (REPORT_INTERVAL_MS / 1000);
  }

  /** Requests the gateway answered (not 429) per second over the last few seconds. */
  private answeredRate(now: number): number {
    return this.rateOf(now, (r) => r.answered.submit + r.answered.status);
  }

  private rateOf(now: number, f: (r: RateReport) => number): number {
    // Each report covers about the second before it, so a window holding reports since `oldest` spans that
    // much more (a learner that just started, or demand that just began, is not averaged over idle time).
    const oldest = this.arrivals.find((a) => a.at > now - WINDOW_MS)?.at;
    if (oldest === undefined) return 0;
    const spanMs = Math.min(WINDOW_MS, this.lastArrival() - oldest + REPORT_INTERVAL_MS);
    return this.sum(now, f) / (spanMs / 1000);
  }

  report(now: number, report: RateReport): void {
    this.reports += 1;
    this.arrivals.push({ at: now, report });
    while (this.arrivals.length > 0 && this.arrivals[0]!.at <= now - WINDOW_MS) this.arrivals.shift();
    this.grow(now);
    const limited = report.rateLimited.submit + report.rateLimited.status;
    if (limited > 0) {
      this.rateLimited += limited;
      this.on429(now, report);
    }
  }

  /** Grows the limit for the time since the last call, if it was binding (never while idle or held). */
  grow(now: number): void {
    const dt = Math.min(1, Math.max(0, now - this.grownAt) / 1000);
    this.grownAt = now;
    const s = this.state;
    if (s.pinned !== null || now < s.holdUntil || dt === 0) return;
    if (!this.saturated(now)) {
      this.atCapSince = undefined; // a cap not filled tells nothing about the gateway
      return;
    }
    if (s.ceiling === undefined) {
      s.limit = Math.min(this.maxRate, s.limit * Math.pow(SLOW_START, dt));
      return;
    }
    const probingS = (now - s.cutAt - s.plateauMs) / 1000;
    if (probingS < 0) return;
    const growth = Math.min(this.probeMax, 1 + PROBE_START + PROBE_ACCEL * probingS);
    const cap = s.ceiling * PROBE_ABOVE;
    s.limit = Math.min(this.maxRate, cap, s.limit * Math.pow(growth, dt));
    if (s.limit < cap) return;
    // At the cap, the workers sending more than the ceiling: the gateway's burst is spent within PROBE_HOLD_MS,
    // so no 429 by then means it takes this rate. It becomes the ceiling, and the next probe goes on from it.
    // A cap the demand never went over says nothing of the gateway: raised on no evidence, the ceiling would
    // let the next burst of demand run into the gateway's limit.
    if (this.sendingRate(now) <= s.ceiling) {
      this.atCapSince = undefined;
      return;
    }
    this.atCapSince ??= now;
    if (now - this.atCapSince < PROBE_HOLD_MS) return;
    s.ceiling = cap;
    s.confirmations = 0;
    this.atCapSince = undefined;
  }

  private on429(now: number, report: RateReport): void {
    const s = this.state;
    if (this.capacityRefusal(now, report)) return;
    if (this.holdShortRetryAfter || report.retryAfterMs > LONG_RETRY_AFTER_MS)
      s.holdUntil = Math.max(s.holdUntil, now + report.retryAfterMs);
    if (s.pinned !== null || now - s.cutAt < SAME_EPISODE_MS) return;
    // The rate at which it hit: the limit in force when the queue was full, else what the workers sent, in
    // their busiest second (averaged over idle seconds, a burst read as 3.3 requests/s against a 5 rps gateway).
    const inForce = this.limitInForce(now);
    const saturated = this.saturated(now);
    const sending = Math.max(this.sendingRate(now), this.peakSendingRate(now));
    let hit = Math.max(MIN_RATE, sending >= SATURATED * inForce ? inForce : sending);
    // In slow start the limit doubles each second, so the lowest one in force over the window is far under the
    // rate that drew the 429; the requests the gateway answered over it are not (its rate plus its burst).
    // (Never above the highest limit in force: the queue let no more through.)
    if (s.ceiling === undefined)
      hit = Math.max(hit, Math.min(this.answeredRate(now), this.limitInForce(now, 'highest')));
    // A 429 while the limit still sits where the last cut put it (no probe since) says that cut was not deep
    // enough: the ceiling is what the gateway answered meanwhile, never a confirmation. Else each such 429 cut
    // only 5%, and a first ceiling read high from the gateway's burst took ten seconds of 429s to come down.
    // (What it answered is the gateway's rate only while the workers kept the queue full: else it is demand.)
    const onPlateau = s.ceiling !== undefined && now - s.cutAt < s.plateauMs && hit < s.ceiling;
    if (onPlateau && saturated) {
      const answered = this.answeredRate(now);
      if (answered > 0) hit = Math.max(MIN_RATE, Math.min(hit, answered));
    }
    // A probe above the ceiling (at most PROBE_ABOVE of it) that hits confirms it: the gateway refuses over
    // it. Read as a new ceiling, the probe's rate would be too high: the burst lets a probe run over the
    // limit for seconds before its first 429, and the 429 is seen two seconds later still.
    // A ceiling no 429 has confirmed yet (the first one, often under the gateway's limit) moves up to the hit.
    const ceiling = s.ceiling !== undefined && hit >= s.ceiling && s.confirmations > 0 ? s.ceiling : hit;
    this.atCapSince = undefined;
    const confirmed =
      !onPlateau && s.ceiling !== undefined && Math.abs(ceiling - s.ceiling) <= SAME_CEILING * s.ceiling;
    s.confirmations = confirmed ? s.confirmations + 1 : 0;
    s.plateauMs = Math.min(MAX_PLATEAU_MS, this.minPlateauMs * 2 ** s.confirmations);
    s.ceiling = ceiling;
    // 90% whether confirmed or not: the ceiling is a limit at which a 429 came, not the gateway's rate, which can
    // be a few percent under it; 95% of a probe's hit left the limit over a 5 requests/s gateway, and the next
    // 429 came as soon as its Retry-After was up.
    const cutTo = ceiling * this.cut;
    // A 429 never raises the limit, whatever rate it is read at (a limit written late leaves an older, higher
    // one "in force").
    s.limit = Math.max(MIN_RATE, Math.min(s.limit, cutTo));
    s.cutAt = now;
  }

  /**
   * Submissions refused with a long Retry-After, no status check refused: not a rate limit (the prompts wait
   * their own Retry-After; a gateway limiting every request refuses status checks too, and that holds the
   * queue), even at the start of a batch before any status check was answered.
   */
  private capacityRefusal(now: number, report: RateReport): boolean {
    return (
      report.rateLimited.status === 0 &&
      report.retryAfterMs > LONG_RETRY_AFTER_MS &&
      this.sum(now, (r) => r.rateLimited.status) === 0
    );
  }

  /** The limit the server enforced over the last window: the lowest applied in it (a write governs dispatches ~150 ms later). */
  private limitInForce(now: number, which: 'lowest' | 'highest' = 'lowest'): number {
    const from = now - WINDOW_MS - TAKES_EFFECT_MS;
    const pick = which === 'lowest' ? Math.min : Math.max;
    let inForce: number | undefined;
    for (const { at, rps } of this.appliedLog) {
      if (rps === 0) continue; // holds are not what the gateway refused
      if (at <= from)
        inForce = rps; // the last one before the window
      else if (at <= now - TAKES_EFFECT_MS) inForce = pick(inForce ?? rps, rps);
    }
    return inForce ?? this.state.pinned ?? this.state.limit;
  }

  private saturated(now: number): boolean {
    return this.sendingRate(now) >= SATURATED * this.limitInForce(now);
  }

  private sum(now: number, f: (r: RateReport) => number): number {
    let n = 0;
    for (const a of this.arrivals) if (a.at > now - WINDOW_MS) n += f(a.report);
    return n;
  }

  private lastArrival(): number {
    return this.arrivals.at(-1)?.at ?? Number.NEGATIVE_INFINITY;
  }
}

function initialState(options: LearnerOptions = {}): LearnerState {
  return {
    limit: options.initialRate ?? INITIAL_RATE,
    cutAt: 0, // JSON-safe "never"
    plateauMs: options.plateauMs ?? 5000,
    confirmations: 0,
    holdUntil: 0,
    pinned: null,
  };
}

/**
 * A fresh learner's state from the queue's limit as the server kept it (`readQueueLimit`), instead of a slow
 * start. The reason a vidbatch learner wrote carries its learned limit and ceiling; a limit someone else set
 * (`temporal task-queue config set`) seeds the limit alone. A hold is kept only while its end is ahead: a
 * stale one, or one whose end cannot be read, gives way to the learned limit. After a seed with a ceiling the
 * learner waits a quiet plateau before probing, as after a cut.
 */
export function seedState(limit: QueueLimit | null, now: number, options: LearnerOptions = {}): LearnerState {
  const state = initialState(options);
  if (limit === null || limit.rps === null) return state;
  const parsed = parseReason(limit.reason);
  const seeded = parsed.state;
  if (seeded !== undefined) {
    state.limit = seeded.learned;
    if (seeded.ceiling !== undefined) {
      state.ceiling = seeded.ceiling;
      state.confirmations = seeded.confirmations ?? 0;
      state.plateauMs = Math.min(MAX_PLATEAU_MS, state.plateauMs * 2 ** state.confirmations);
      state.cutAt = now;
    }
    if (seeded.pinned !== undefined) state.pinned = seeded.pinned;
  } else if (limit.rps > 0) {
    state.limit = limit.rps; // someone else's limit: the number alone
  }
  if (limit.rps === 0 && parsed.vidbatch && typeof parsed.holdUntil === 'number' && parsed.holdUntil > now)
    state.holdUntil = parsed.holdUntil;
  state.limit = Math.max(MIN_RATE, state.limit);
  return state;
}

function round(rps: number): number {
  return Math.round(rps * 100) / 100;
}
