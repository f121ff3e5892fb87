// What a worker does with a 429 on its own: calls of the refused kind (submissions, or status checks) wait out
// the Retry-After the gateway gave, and at most a second longer (spread). The pace itself is not the worker's: every gateway call runs
// on the gateway queue, whose server-side rate limit the learner workflow sets for all workers together
// (docs/rate-budget.md). A hold is per kind: a 429 on a status check does not stop submissions (a gateway that
// limits every request refuses the next submission too, and that holds submissions as well).
import { NotSentError } from './errors';

export type CallKind = 'submit' | 'status';

interface Waiter {
  kind: CallKind;
  timer: ReturnType<typeof setTimeout>;
  reject: (err: Error) => void;
}

/**
 * Held calls go, and turned-away ones come back, spread over this much past the hold's end: sent all at once,
 * on top of what the queue dispatched meanwhile, they outran the gateway's refilled burst and drew the next 429.
 */
const SPREAD_MS = 1000;

export class RetryAfterHolds {
  private readonly until: Record<CallKind, number> = { submit: 0, status: 0 };
  private readonly waiting = new Set<Waiter>();
  private closed: ((kind: CallKind) => Error) | undefined;

  constructor(
    private readonly now: () => number = Date.now,
    private readonly random: () => number = Math.random,
  ) {}

  /** A call of `kind` got 429: this worker's calls of that kind wait until Retry-After is up. */
  hold(kind: CallKind, retryAfterMs: number): void {
    this.until[kind] = Math.max(this.until[kind], this.now() + retryAfterMs);
  }

  /** How long calls of `kind` still wait (ms; 0: none). */
  remainingMs(kind: CallKind): number {
    return Math.max(0, this.until[kind] - this.now());
  }

  /**
   * Resolves at once without a hold, or a little after the hold ends (spread, within `maxWaitMs`) if it ends
   * within `maxWaitMs`. Otherwise rejects with NotSentError carrying when to come back (the hold's end,
   * spread), so an activity never waits past its own timeout and nothing is sent.
   */
  wait(kind: CallKind, maxWaitMs: number): Promise<void> {
    if (this.closed) return Promise.reject(this.closed(kind));
    const holdMs = this.remainingMs(kind);
    if (holdMs === 0) return Promise.resolve();
    const backMs = Math.round(holdMs + this.random() * SPREAD_MS);
    if (holdMs > maxWaitMs) {
      return Promise.reject(
        new NotSentError(
          backMs,
          `the gateway asked to wait (429 Retry-After); try again in ${Math.ceil(backMs / 1000)} s`,
        ),
      );
    }
    const waitMs = Math.min(backMs, maxWaitMs);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        kind,
        reject,
        timer: setTimeout(() => {
          this.waiting.delete(waiter);
          // Held again meanwhile (another 429 of this kind): wait for the new end, within what is left.
          resolve(this.wait(kind, maxWaitMs - waitMs));
        }, waitMs),
      };
      this.waiting.add(waiter);
    });
  }

  /** The worker is stopping: every call still waiting is turned away with the error `reason` makes for it. */
  close(reason: (kind: CallKind) => Error): void {
    this.closed = reason;
    for (const waiter of this.waiting) {
      clearTimeout(waiter.timer);
      waiter.reject(reason(waiter.kind));
    }
    this.waiting.clear();
  }
}
