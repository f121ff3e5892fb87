// What a worker does with a 429 on its own: calls of the refused kind (submissions, or status checks) wait out
// the Retry-After the gateway gave, and no longer. The pace itself is not the worker's: every gateway call runs
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

/** Come-back times are spread over this much past the hold's end, so held calls do not return all at once. */
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
   * Resolves at once without a hold, or when the hold ends if that is within `maxWaitMs`. Otherwise rejects
   * with NotSentError carrying when to come back (the hold's end, spread), so an activity never waits past its
   * own timeout and nothing is sent.
   */
  wait(kind: CallKind, maxWaitMs: number): Promise<void> {
    if (this.closed) return Promise.reject(this.closed(kind));
    const holdMs = this.remainingMs(kind);
    if (holdMs === 0) return Promise.resolve();
    if (holdMs > maxWaitMs) {
      const back = Math.round(holdMs + this.random() * SPREAD_MS);
      return Promise.reject(
        new NotSentError(
          back,
          `the gateway asked to wait (429 Retry-After); try again in ${Math.ceil(back / 1000)} s`,
        ),
      );
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        kind,
        reject,
        timer: setTimeout(() => {
          this.waiting.delete(waiter);
          // Held again meanwhile (another 429 of this kind): wait for the new end, within what is left.
          resolve(this.wait(kind, maxWaitMs - holdMs));
        }, holdMs),
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
