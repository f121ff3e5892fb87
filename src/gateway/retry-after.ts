// Retry-After is "seconds" or an HTTP-date (RFC 9110 §10.2.3); the seed leaves the unit open, so accept both.
// No maintained npm package does only this; undici's RetryHandler parses it but also retries on its own,
// which would hide 429s from the durable layer that must see them.

/**
 * Milliseconds to wait, or undefined when the header is absent or unreadable (negative, not a number, not an
 * HTTP-date): the caller waits the documented default then, and says so. A date in the past is 0.
 */
export function parseRetryAfter(
  value: string | null | undefined,
  now: number = Date.now(),
): number | undefined {
  if (value == null) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  // Date.parse reads "-5" or "2030" as dates; an HTTP-date has a day or month name and a time of day.
  if (!/[A-Za-z]{3}/.test(text) || !/\d{1,2}:\d{2}:\d{2}/.test(text)) return undefined;
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}
