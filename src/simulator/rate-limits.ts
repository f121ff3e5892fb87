// Rate limits of the simulated gateway and the 429s they give (spec section 8): a token bucket per key, a cap
// on a key's unfinished jobs, and a hold (every /v1 request refused until a time, as a spent quota would).
// Every 429 carries a Retry-After, in seconds or as an HTTP date, never shorter than `retryAfterMinSeconds`.
import { HttpError } from './http';
import type { SimulatorState } from './state';

export class RateLimits {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  /** Epoch ms until which every /v1 request is held with 429; 0 = no hold. */
  holdUntil = 0;
  /** Hold windows [from, until], to count jobs that finished while clients were held. */
  private readonly holds: [number, number][] = [];

  /** Sets (or with 0/undefined, releases) the hold at `now`. */
  setHold(until: number | Date | undefined, now: number): void {
    const at = until === undefined ? 0 : typeof until === 'number' ? until : until.getTime();
    // A release or a new hold closes the current window at now.
    const open = this.holds.at(-1);
    if (open && open[1] > now) open[1] = now;
    this.holdUntil = at > now ? at : 0;
    if (this.holdUntil) this.holds.push([now, this.holdUntil]);
  }

  /** Ms left on the hold at `now`, or 0. */
  holdWait(now: number): number {
    return Math.max(0, this.holdUntil - now);
  }

  /** Whether `at` fell inside a hold window. */
  wasHeld(at: number): boolean {
    return this.holds.some(([from, until]) => at >= from && at < until);
  }

  /** Takes one token from the key's bucket; returns ms to wait when empty (0 when `rate` is 0: no limit). */
  takeToken(keyId: string, rate: number, burstOption: number, now: number): number {
    if (rate <= 0) return 0;
    const burst = burstOption > 0 ? burstOption : Math.max(1, rate);
    const bucket = this.buckets.get(keyId) ?? { tokens: burst, at: now };
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * rate);
    bucket.at = now;
    this.buckets.set(keyId, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - bucket.tokens) / rate) * 1000);
  }
}

/** Ms until one of the key's unfinished jobs finishes, when it has `cap` of them (0: no cap); else 0. */
export function runningCapWait(doneAts: number[], cap: number, now: number): number {
  if (cap <= 0) return 0;
  const active = doneAts.filter((doneAt) => doneAt > now);
  if (active.length < cap) return 0;
  return Math.min(...active) - now;
}

/** The Retry-After header for a wait of `waitMs`, in the configured format. */
export function retryAfterHeader(state: SimulatorState, waitMs: number): string {
  const ms = Math.max(waitMs, state.faults.retryAfterMinSeconds * 1000);
  return state.options.retryAfterFormat === 'date'
    ? new Date(Math.ceil((state.now() + ms) / 1000) * 1000).toUTCString()
    : String(Math.max(1, Math.ceil(ms / 1000)));
}

/** A counted 429 with its Retry-After; `reason` is what the counters file it under. */
export function tooMany(
  state: SimulatorState,
  reason: string,
  code: string,
  message: string,
  waitMs: number,
): HttpError {
  state.count429(reason);
  return new HttpError(429, code, message, { 'retry-after': retryAfterHeader(state, waitMs) });
}

/** The hold and the key's bucket, in that order: the 429 a /v1 request gets before anything else, if any. */
export function checkLimits(state: SimulatorState, keyId: string): void {
  const held = state.holdWait();
  if (held > 0) throw tooMany(state, 'held', 'rate_limited', 'Quota exhausted; retry later.', held);
  const wait = state.takeToken(keyId);
  if (wait > 0) throw tooMany(state, 'rate_limited', 'rate_limited', 'Rate limit exceeded.', wait);
}
