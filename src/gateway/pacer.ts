// One pacer per worker process in front of every gateway call. The gateway's limits are "not shown" in the
// spec, so the pacer discovers them: it ramps up while calls queue (slow start), takes the send rate at a
// 429 as the ceiling, settles just under it, and after a quiet plateau probes higher, faster and faster.
// The plateau doubles each time a 429 confirms the same ceiling (a steady limit costs few 429s) and is
// short again when the limit moved (a limit lowered for a while is soon used in full again). After a 429,
// every call from this worker waits out the Retry-After. Submissions go before status checks: a job's
// latency clock starts when it is submitted, and a later status check is more likely to find it finished.
import { PacerBusyError } from './errors';

export type CallKind = 'submit' | 'status';

export interface PacerOptions {
  /** Requests/second before anything is known. */
  initialRate?: number;
  /** Upper bound on the rate (a gateway without limits). */
  maxRate?: number;
  /** Fraction of the ceiling to settle at. */
  headroom?: number;
  /** Shortest quiet plateau after a 429 before probing above the ceiling (default 5 s). */
  plateauMs?: number;
  now?: () => number;
}

interface Waiter {
  kind: CallKind;
  resolve: () => void;
  reject: (err: Error) => void;
  timer: ReturnType<typeof setTimeout> | undefined;
}

const SLOW_START = 2; // × per saturated second until the first 429
const APPROACH = 1.1; // × per saturated second towards the settle point
// Once the plateau is over the rate grows by 5% per saturated second at first, 5 points more each second
// (capped at 2×): a steady limit is met again within a second or two, a lifted one is back in full in ~10 s.
const PROBE_START = 0.05;
const PROBE_ACCEL = 0.05;
const CUT = 0.7; // rate after a 429, as a share of the ceiling
const SAME_CEILING = 0.15; // a new ceiling this close to the last one confirms it
const MAX_PLATEAU_MS = 120_000;
const MIN_RATE = 0.5;
const SAME_EPISODE_MS = 2000; // 429s this soon after a cut answer requests sent before it
// The send rate at a 429 is measured over this long. A short window still sees the gateway's burst allowance
// (so the first ceiling is high), but it does not see the slow-start ramp (which would make it far too low);
// each later 429 at the settle point takes the ceiling 5% lower, so it converges from above in a few steps.
const RATE_WINDOW_MS = 2000;

export class RequestPacer {
  private rate: number;
  private ceiling: number | undefined;
  private tokens = 1;
  private refilledAt: number;
  private grownAt: number;
  private holdUntil = 0;
  private cutAt = Number.NEGATIVE_INFINITY;
  private plateauMs: number;
  private confirmations = 0;
  /**
   * When each caller turned away is due back (ms epoch), by kind: counted so that they come back spread
   * out, and so that status checks do not take the slots of submissions due back soon.
   */
  private readonly promised: Record<CallKind, number[]> = { submit: [], status: [] };
  private readonly sent: number[] = [];
  private readonly queues: Record<CallKind, Waiter[]> = { submit: [], status: [] };
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly maxRate: number;
  private readonly headroom: number;
  private readonly minPlateauMs: number;
  private readonly now: () => number;
  /** Set once the server's task-queue limit paces gateway calls (followServerLimit). */
  private onSent: ((kind: CallKind) => void) | undefined;
  private serverLimited = false;

  constructor(options: PacerOptions = {}) {
    this.now = options.now ?? Date.now;
    this.rate = options.initialRate ?? 4;
    this.maxRate = options.maxRate ?? 1000;
    this.headroom = options.headroom ?? 0.95;
    this.minPlateauMs = this.plateauMs = options.plateauMs ?? 5000;
    this.refilledAt = this.grownAt = this.now();
  }

  /**
   * The server's task-queue limit now paces gateway calls for all workers (src/worker/gateway-worker.ts):
   * stop learning a rate here (the learner workflow does), keep Retry-After holds and submissions first, and
   * tell `onSent` about every request let through.
   */
  followServerLimit(onSent?: (kind: CallKind) => void): void {
    this.serverLimited = true;
    this.onSent = onSent;
    this.rate = this.maxRate;
    this.ceiling = undefined;
  }

  /** Current pace and what it has learned, for logs, metrics and tests. */
  snapshot(): { rate: number; ceiling: number | undefined; queued: number; holdMs: number } {
    return {
      rate: this.rate,
      ceiling: this.ceiling,
      queued: this.queues.submit.length + this.queues.status.length,
      holdMs: Math.max(0, this.holdUntil - this.now()),
    };
  }

  /**
   * Resolves when the call may be sent. Rejects with PacerBusyError (carrying when to come back) when the
   * wait would exceed `maxWaitMs`, so an activity never sits in the queue past its own timeout.
   */
  acquire(kind: CallKind, maxWaitMs: number): Promise<void> {
    this.refill();
    if (this.queuedAhead(kind, maxWaitMs) === 0 && this.now() >= this.holdUntil && this.tokens >= 1) {
      this.take(kind);
      return Promise.resolve();
    }
    const estimate = this.estimateWait(kind, maxWaitMs);
    if (estimate > maxWaitMs) return Promise.reject(this.busy(kind, maxWaitMs));
    return new Promise((resolve, reject) => {
      // Later submissions can overtake a queued status check, so its wait is bounded by a timer too.
      const expire = () => {
        const queue = this.queues[kind];
        queue.splice(queue.indexOf(waiter), 1);
        reject(this.busy(kind, maxWaitMs));
      };
      const waiter: Waiter = {
        kind,
        resolve,
        reject,
        timer: Number.isFinite(maxWaitMs) ? setTimeout(expire, maxWaitMs) : undefined,
      };
      this.queues[kind].push(waiter);
      this.schedule();
    });
  }

  /**
   * The worker is stopping: every call still waiting for a slot is turned away with the error `reason` makes
   * for it (nothing of theirs is sent). Later calls are the client's to refuse.
   */
  close(reason: (kind: CallKind) => Error): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const kind of ['submit', 'status'] as const) {
      for (const waiter of this.queues[kind].splice(0)) {
        clearTimeout(waiter.timer);
        waiter.reject(reason(kind));
      }
    }
  }

  /**
   * A call got 429: hold every call for Retry-After and, once per episode, lower the ceiling, but only when
   * this worker was sending at its pace (otherwise its pace is not what the gateway refused).
   */
  rateLimited(retryAfterMs: number): void {
    const now = this.now();
    this.holdUntil = Math.max(this.holdUntil, now + retryAfterMs);
    if (this.serverLimited) return this.schedule();
    const sending = this.recentSendRate();
    // Compared with the ceiling too: while probing, the rate grows faster than a measured send rate follows.
    const pace = Math.min(this.rate, this.ceiling ?? this.rate);
    if (now - this.cutAt >= SAME_EPISODE_MS && (this.ceiling === undefined || sending >= 0.8 * pace)) {
      const ceiling = Math.max(MIN_RATE, Math.min(this.rate, sending || this.rate));
      const confirmed =
        this.ceiling !== undefined && Math.abs(ceiling - this.ceiling) <= SAME_CEILING * this.ceiling;
      this.confirmations = confirmed ? this.confirmations + 1 : 0;
      this.plateauMs = Math.min(MAX_PLATEAU_MS, this.minPlateauMs * 2 ** this.confirmations);
      this.ceiling = ceiling;
      this.rate = Math.max(MIN_RATE, ceiling * CUT);
      this.cutAt = now;
    }
    this.schedule();
  }

  /** Calls that go before one of `kind` arriving now and waiting up to `withinMs`. */
  private queuedAhead(kind: CallKind, withinMs: number): number {
    if (kind === 'submit') return this.queues.submit.length;
    return this.queues.submit.length + this.queues.status.length + this.promisedWithin('submit', withinMs);
  }

  private promisedWithin(kind: CallKind, withinMs: number): number {
    const now = this.now();
    this.promised[kind] = this.promised[kind].filter((t) => t > now);
    return this.promised[kind].filter((t) => t <= now + withinMs).length;
  }

  private estimateWait(kind: CallKind, withinMs: number): number {
    const hold = Math.max(0, this.holdUntil - this.now());
    return hold + ((this.queuedAhead(kind, withinMs) + 1 - Math.min(1, this.tokens)) / this.rate) * 1000;
  }

  /**
   * Turns a caller away with a time to come back: after the queue and the callers already turned away, at
   * today's rate, jittered. Capped during slow start, where today's rate overstates the wait.
   */
  private busy(kind: CallKind, maxWaitMs: number): PacerBusyError {
    const now = this.now();
    // Behind everything queued and everything due back that goes before this kind.
    const due =
      this.promisedWithin('submit', Infinity) +
      (kind === 'status' ? this.promisedWithin('status', Infinity) : 0);
    const horizon = this.estimateWait(kind, 0) + (due / this.rate) * 1000;
    const cap = this.ceiling === undefined ? Math.max(5000, 3 * Math.min(maxWaitMs, 60_000)) : Infinity;
    // Jittered ±10%; a capped wait is spread over 30-100% of the cap instead, or all would return at once.
    const delay = Math.round(
      horizon <= cap ? horizon * (0.9 + 0.2 * Math.random()) : cap * (0.3 + 0.7 * Math.random()),
    );
    this.promised[kind].push(now + delay);
    return new PacerBusyError(delay);
  }

  private refill(): void {
    const now = this.now();
    const burst = Math.max(1, this.rate / 10);
    this.tokens = Math.min(burst, this.tokens + ((now - this.refilledAt) / 1000) * this.rate);
    this.refilledAt = now;
  }

  private take(kind: CallKind): void {
    this.onSent?.(kind);
    this.tokens -= 1;
    const now = this.now();
    this.sent.push(now);
    while (this.sent.length > 0 && this.sent[0]! < now - RATE_WINDOW_MS) this.sent.shift();
  }

  private recentSendRate(): number {
    const now = this.now();
    return (this.sent.filter((t) => t >= now - RATE_WINDOW_MS).length * 1000) / RATE_WINDOW_MS;
  }

  /** Raises the rate for time spent with calls waiting (never while idle, so an unused rate never grows). */
  private grow(saturated: boolean): void {
    const now = this.now();
    const dt = Math.min(1, (now - this.grownAt) / 1000);
    this.grownAt = now;
    if (!saturated || now < this.holdUntil || this.serverLimited) return;
    if (this.ceiling === undefined) {
      this.rate = Math.min(this.maxRate, this.rate * Math.pow(SLOW_START, dt));
      return;
    }
    const settle = this.ceiling * this.headroom;
    const probingS = (now - this.cutAt - this.plateauMs) / 1000;
    if (probingS >= 0) {
      const growth = Math.min(2, 1 + PROBE_START + PROBE_ACCEL * probingS);
      this.rate = Math.min(this.maxRate, Math.max(settle, this.rate) * Math.pow(growth, dt));
    } else if (this.rate < settle) {
      this.rate = Math.min(settle, this.rate * Math.pow(APPROACH, dt));
    }
  }

  private dispatch(): void {
    this.timer = undefined;
    this.refill();
    const waiting = () => this.queues.submit.length + this.queues.status.length;
    this.grow(waiting() > 0);
    while (waiting() > 0 && this.now() >= this.holdUntil && this.tokens >= 1) {
      const waiter = (this.queues.submit.length > 0 ? this.queues.submit : this.queues.status).shift()!;
      clearTimeout(waiter.timer);
      this.take(waiter.kind);
      waiter.resolve();
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.timer || this.queues.submit.length + this.queues.status.length === 0) return;
    const untilToken = ((1 - Math.min(1, this.tokens)) / this.rate) * 1000;
    const delay = Math.max(this.holdUntil - this.now(), untilToken, 1);
    this.timer = setTimeout(() => this.dispatch(), delay);
  }
}
