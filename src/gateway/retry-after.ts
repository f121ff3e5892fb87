// Retry-After is "seconds" or an HTTP-date (RFC 9110 §10.2.3); the seed leaves the unit open, so accept both.
// No maintained npm package does only this; undici's RetryHandler parses it but also retries on its own,
// which would hide 429s from the durable layer that must see them.

/**
 * The longest wait a Retry-After can ask for: a longer one is clamped to it. A gateway that sends milliseconds
 * where seconds are meant ("86400000") would otherwise hold every batch's budget at 0 for days; an hour still
 * covers a quota that resets on the hour, and the next 429 asks again.
 */
export const MAX_RETRY_AFTER_MS = 60 * 60_000;

export interface RetryAfter {
  /** Milliseconds to wait: what the header asked, at most the cap. */
  ms: number;
  /** The header asked for more than the cap: `ms` is the cap (worth a warning, with `askedMs`). */
  clamped: boolean;
  /** Milliseconds the header asked for, before the cap. */
  askedMs: number;
}

/**
 * The wait a Retry-After header asks for, capped at `capMs`; undefined when the header is absent or unreadable
 * (negative, not a number, not an HTTP-date): the caller waits the documented default then, and says so. A date
 * in the past is 0.
 */
export function readRetryAfter(
  value: string | null | undefined,
  now: number = Date.now(),
  capMs: number = MAX_RETRY_AFTER_MS,
): RetryAfter | undefined {
  const askedMs = askedWait(value, now);
  if (askedMs === undefined) return undefined;
  return askedMs > capMs ? { ms: capMs, clamped: true, askedMs } : { ms: askedMs, clamped: false, askedMs };
}

/** Milliseconds to wait (capped as readRetryAfter does), or undefined when absent or unreadable. */
export function parseRetryAfter(
  value: string | null | undefined,
  now: number = Date.now(),
  capMs: number = MAX_RETRY_AFTER_MS,
): number | undefined {
  return readRetryAfter(value, now, capMs)?.ms;
}

function askedWait(value: string | null | undefined, now: number): number | undefined {
  if (value == null) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  // Date.parse reads "-5" or "2030" as dates; an HTTP-date has a day or month name and a time of day.
  if (!/[A-Za-z]{3}/.test(text) || !/\d{1,2}:\d{2}:\d{2}/.test(text)) return undefined;
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}
