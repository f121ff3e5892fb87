// Where notice URLs are kept. A notice URL is a secret (a Slack incoming webhook's path is its key), so no
// workflow input, result or history holds one: `run` keeps each URL in the batch's output root (or the shared
// store), beside its rows file, at a key named by the URL's sha256, and the batch carries that reference and the
// URL's origin. The worker that delivers a notice reads the URL back from there, as it reads the rows.
import { createHash } from 'node:crypto';
import type { NoticeTo } from '../contract/notice';
import type { ObjectStore } from '../store/object-store';
import { shownUrl } from './notice-urls';

/** The folder of notice URLs under an output root or the store (beside `.rows`, which the index never reads). */
export const NOTICE_URLS_DIR = '.notify';

/** Hex digits of the URL's sha256 a reference keeps: 128 bits, so two URLs never share one. */
const REF_LENGTH = 32;

/** The reference the batch carries for `url`: the same for every batch and machine that notifies it. */
export function noticeRef(url: string): string {
  return createHash('sha256').update(url).digest('hex').slice(0, REF_LENGTH);
}

/** Where the URL of `ref` is kept, under the root that holds the batch's folder. */
export function noticeUrlKey(ref: string): string {
  if (!new RegExp(`^[0-9a-f]{${REF_LENGTH}}$`).test(ref)) throw new Error(`not a notice reference: ${ref}`);
  return `${NOTICE_URLS_DIR}/${ref}`;
}

/** What the batch carries for `url`: its origin, to show, and its reference. */
export function noticeTo(url: string): NoticeTo {
  return { shown: shownUrl(url), ref: noticeRef(url) };
}

/**
 * What a batch carries for its notices: for the URLs given (`--notify`), else the batch's own from its earlier
 * run (one started before references carries URLs: from now on it carries references to them too). `keep`:
 * the URLs to keep before it starts.
 */
export function noticeDestinations(
  given: readonly string[] | undefined,
  stored: readonly NoticeTo[] | undefined,
): { to?: NoticeTo[]; keep: string[] } {
  if (given?.length) return { to: given.map(noticeTo), keep: [...given] };
  if (!stored?.length) return { keep: [] };
  const old = (t: NoticeTo): t is NoticeTo & { url: string } => !t.ref && !!t.url;
  return {
    to: stored.map((t) => (old(t) ? noticeTo(t.url) : t)),
    keep: stored.filter(old).map((t) => t.url),
  };
}

/** Keeps each URL in `store` (readable by its owner only, in a folder); one kept before is not written again. */
export async function keepNoticeUrls(store: ObjectStore, urls: readonly string[]): Promise<void> {
  for (const url of new Set(urls))
    await store.put(noticeUrlKey(noticeRef(url)), url, {
      ifAbsent: true,
      secret: true,
      contentType: 'text/plain',
    });
}

/**
 * The URL kept for `ref` in `store`, checked against its reference; undefined when none is kept there (or what
 * is there is not that URL: a file edited by hand is not sent to).
 */
export async function keptNoticeUrl(store: ObjectStore, ref: string): Promise<string | undefined> {
  const key = noticeUrlKey(ref);
  const head = await store.head(key);
  if (!head) return undefined;
  const url = (await store.read(key, 0, head.size))?.toString('utf8');
  return url !== undefined && noticeRef(url) === ref ? url : undefined;
}
