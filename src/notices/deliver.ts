// Delivering a notice to one URL: signed the Standard Webhooks way (webhook-id, webhook-timestamp,
// webhook-signature: HMAC-SHA256 with a `whsec_` secret), or, for a Slack incoming webhook, as a short text.
// One attempt per call: the activity's retry policy spaces the attempts, and every attempt carries the same
// webhook-id, so a receiver that got an earlier attempt can tell a repeat.
import { readFileSync } from 'node:fs';
import { Webhook } from 'standardwebhooks';
import { request } from 'undici';
import type { Notice } from '../contract/notice';
import { ConfigError } from '../errors';
import { slackText } from './notice-body';
import { isSlack, shownUrl, SLACK_PREFIX } from './notice-urls';

/** How long one delivery attempt may take: a receiver that never answers costs this, then the next attempt. */
export const DELIVERY_TIMEOUT_MS = 10_000;

/**
 * The secret notices are signed with: VIDBATCH_NOTIFY_SECRET, else the file VIDBATCH_NOTIFY_SECRET_FILE names
 * (`whsec_` and base64, as Standard Webhooks gives them). Undefined: none set; throws for one that is not a
 * usable secret (naming the setting, never the value).
 */
export function loadNoticeSecret(env: NodeJS.ProcessEnv = process.env): string | undefined {
  let secret = env.VIDBATCH_NOTIFY_SECRET?.trim();
  let from = 'VIDBATCH_NOTIFY_SECRET';
  if (!secret && env.VIDBATCH_NOTIFY_SECRET_FILE) {
    from = `VIDBATCH_NOTIFY_SECRET_FILE (${env.VIDBATCH_NOTIFY_SECRET_FILE})`;
    try {
      secret = readFileSync(env.VIDBATCH_NOTIFY_SECRET_FILE, 'utf8').trim();
    } catch (err) {
      throw new ConfigError(`${from} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
  }
  if (!secret) return undefined;
  try {
    new Webhook(secret);
  } catch {
    throw new ConfigError(`${from} is not a webhook secret: expected whsec_ followed by base64`);
  }
  return secret;
}

/** Thrown for an attempt that did not deliver: `retryable` false when no later attempt can do better. */
export class DeliveryError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = 'DeliveryError';
  }
}

/** One delivery attempt of `notice` (id `id`) to `url`; resolves once the receiver answered 2xx. */
export async function deliverOnce(
  id: string,
  url: string,
  notice: Notice,
  secret: string | undefined,
  now = new Date(),
): Promise<void> {
  const slack = isSlack(url);
  const target = url.startsWith(SLACK_PREFIX) ? url.slice(SLACK_PREFIX.length) : url;
  const body = slack ? JSON.stringify({ text: slackText(notice) }) : JSON.stringify(notice);
  const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'vidbatch' };
  if (!slack) {
    if (!secret)
      throw new DeliveryError(
        'no webhook secret on this worker: set VIDBATCH_NOTIFY_SECRET (or VIDBATCH_NOTIFY_SECRET_FILE) to a whsec_ secret',
        false,
      );
    headers['webhook-id'] = id;
    headers['webhook-timestamp'] = String(Math.floor(now.getTime() / 1000));
    headers['webhook-signature'] = new Webhook(secret).sign(id, now, body);
  }
  let status: number;
  try {
    const answer = await request(target, {
      method: 'POST',
      headers,
      body,
      headersTimeout: DELIVERY_TIMEOUT_MS,
      bodyTimeout: DELIVERY_TIMEOUT_MS,
      signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
    });
    status = answer.statusCode;
    await answer.body.dump();
  } catch (err) {
    const e = err as { code?: string; name?: string; message?: string };
    throw new DeliveryError(`no answer from ${shownUrl(url)}: ${e.code ?? e.name ?? e.message}`, true);
  }
  if (status < 200 || status > 299) throw new DeliveryError(`${shownUrl(url)} answered HTTP ${status}`, true);
}
