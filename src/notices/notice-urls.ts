// Notice URLs (`run --notify`): which are Slack incoming webhooks, and how one is shown (its origin only: a
// Slack URL's path is its secret). No imports: the CLI checks URLs before it loads anything else.

export const SLACK_PREFIX = 'slack+';

/** A Slack incoming webhook: its host, or a URL given as `slack+https://...` (a Slack-compatible receiver). */
export function isSlack(url: string): boolean {
  return url.startsWith(SLACK_PREFIX) || safeHost(url) === 'hooks.slack.com';
}

function safeHost(url: string): string | undefined {
  try {
    return new URL(url.startsWith(SLACK_PREFIX) ? url.slice(SLACK_PREFIX.length) : url).hostname;
  } catch {
    return undefined;
  }
}

/** A notice URL as status and logs show it: its origin only (a Slack URL's path is its secret). */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url.startsWith(SLACK_PREFIX) ? url.slice(SLACK_PREFIX.length) : url);
    return `${url.startsWith(SLACK_PREFIX) ? SLACK_PREFIX : ''}${u.origin}/…`;
  } catch {
    return '(not a URL)';
  }
}

/** Why `url` cannot take notices (undefined: it can): for `run --notify`. */
export function noticeUrlProblem(url: string): string | undefined {
  const plain = url.startsWith(SLACK_PREFIX) ? url.slice(SLACK_PREFIX.length) : url;
  let u: URL;
  try {
    u = new URL(plain);
  } catch {
    return 'is not a URL';
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return 'must be an http(s) URL';
  return undefined;
}
