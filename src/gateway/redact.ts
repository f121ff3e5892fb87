// Secrets in text that came from the gateway (or a proxy in front of it), replaced before vidbatch keeps the
// text anywhere: error messages become workflow history, manifest rows, pause reasons and log lines. Not only
// the configured key: a proxy may echo another key (a rotated one, its own) in an error page.

/** An echoed Authorization header's value (`Authorization: ...`, `"authorization":"..."`), to the line's end. */
const AUTHORIZATION_VALUE = /(authorization["']?\s*[:=]\s*["']?)[^"'\r\n]+/gi;
/** A bearer token anywhere (a previous key, a proxy's own). */
const BEARER_TOKEN = /(\bBearer\s+)[^\s"',;]+/gi;
/**
 * Any `sk-` key (the gateway's keys start with `sk-`, spec 2.4; so do many providers'), wherever it stands: at
 * least 8 key characters, so that words such as `sk-learn` or a cut `sk-ab` are left alone.
 */
const SK_TOKEN = /(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{8,}/g;

export const REDACTED = '[redacted]';

/**
 * `text` with `key` (the configured API key, when given), every echoed Authorization value, bearer token and
 * `sk-` token replaced by `[redacted]`. Whole text only: a cut made first could leave part of a key that no
 * longer matches, so callers cut after this.
 */
export function redactSecrets(text: string, key?: string): string {
  return (key ? text.split(key).join(REDACTED) : text)
    .replace(AUTHORIZATION_VALUE, `$1${REDACTED}`)
    .replace(BEARER_TOKEN, `$1${REDACTED}`)
    .replace(SK_TOKEN, REDACTED);
}
