// Notices as activities: composed once (the body every attempt sends), delivered one attempt per activity
// attempt (contract/failures.ts RETRY_POLICIES.deliverNotice spaces and bounds them).
import { dirname, resolve } from 'node:path';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Notice, NoticeRequest, NoticeTo } from '../contract/notice';
import { FailureType } from '../contract/failures';
import { deliverOnce, DeliveryError } from '../notices/deliver';
import { composeNotice } from '../notices/notice-body';
import { keptNoticeUrl, noticeUrlKey } from '../notices/notice-store';
import { LocalStore } from '../store/local-store';
import type { ObjectStore } from '../store/object-store';
import { objectAt } from '../store/open-store';
import { isStoreUrl, joinStorePath } from '../store/store-url';
import { allowedPath, type PathRoots } from './paths';

const resolveOut = (root: string, batchId: string) =>
  isStoreUrl(root) ? joinStorePath(root, batchId) : resolve(root, batchId);

/** One delivery: the notice, and where to (a reference read from the batch's root; never the URL in history). */
export interface DeliverNoticeInput {
  id: string;
  notice: Notice;
  to?: NoticeTo;
  batchId?: string;
  /** The batch's folder (absent: `<out root>/<batchId>`); its root keeps the notice URLs. */
  outDir?: string;
  /** The URL itself: attempts a notice scheduled before references. */
  url?: string;
}

/**
 * `secret`: the worker's webhook secret (notices/deliver.ts loadNoticeSecret), never sent anywhere else.
 * `outRoot`: where a batch that names no folder of its own keeps its files (`<outRoot>/<batchId>`).
 * `roots`: the folders this worker may read (activities/paths.ts); undefined: anywhere.
 */
export function createNoticeActivities(secret: string | undefined, outRoot: string, roots?: PathRoots) {
  /** The store holding the batch's folder, where `run` kept its notice URLs (notices/notice-store.ts). */
  async function rootOf(batchId: string, outDir: string | undefined): Promise<ObjectStore> {
    const own = outDir ?? resolveOut(outRoot, batchId);
    if (!isStoreUrl(own)) return new LocalStore(dirname(await allowedPath(own, 'out', roots)));
    // `run` keeps them at the top of the store (VIDBATCH_STORE) that holds the batch's folder.
    return (await objectAt(own)).store;
  }

  async function urlOf(input: DeliverNoticeInput): Promise<string> {
    const direct = input.to?.url ?? input.url;
    if (direct) return direct;
    const ref = input.to?.ref;
    if (!ref || !input.batchId)
      throw new DeliveryError('the notice names no URL and no reference to one', false);
    const shown = input.to?.shown ?? 'its URL';
    let where = `${noticeUrlKey(ref)} beside the batch's folder`;
    try {
      const store = await rootOf(input.batchId, input.outDir);
      where = store.urlOf(noticeUrlKey(ref));
      const url = await keptNoticeUrl(store, ref);
      if (url) return url;
    } catch (err) {
      // Another worker (one that shares the root) may read it: the attempt is retried.
      throw new DeliveryError(
        `cannot read where ${shown} is kept (${where}): ${(err as Error).message}`,
        true,
      );
    }
    throw new DeliveryError(
      `${shown} is not kept at ${where}: run keeps notice URLs there, so this worker must share its output root (or VIDBATCH_STORE)`,
      true,
    );
  }

  return {
    composeNotice: (request: NoticeRequest): Promise<Notice> =>
      composeNotice({ ...request, outDir: request.outDir ?? resolveOut(outRoot, request.batchId) }),

    /** One attempt; resolves to the attempt's number once the receiver took the notice. */
    async deliverNotice(input: DeliverNoticeInput): Promise<number> {
      try {
        await deliverOnce(input.id, await urlOf(input), input.notice, secret);
        return Context.current().info.attempt;
      } catch (err) {
        if (!(err instanceof DeliveryError)) throw err;
        throw ApplicationFailure.create({
          message: err.message,
          type: FailureType.NoticeNotDelivered,
          nonRetryable: !err.retryable,
        });
      }
    },
  };
}
