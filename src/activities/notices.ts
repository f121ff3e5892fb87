// Notices as activities: composed once (the body every attempt sends), delivered one attempt per activity
// attempt (contract/failures.ts RETRY_POLICIES.deliverNotice spaces and bounds them).
import { resolve } from 'node:path';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Notice, NoticeRequest } from '../contract/notice';
import { FailureType } from '../contract/failures';
import { deliverOnce, DeliveryError } from '../notices/deliver';
import { composeNotice } from '../notices/notice-body';
import { isStoreUrl, joinStorePath } from '../store/store-url';

const resolveOut = (root: string, batchId: string) =>
  isStoreUrl(root) ? joinStorePath(root, batchId) : resolve(root, batchId);

/**
 * `secret`: the worker's webhook secret (notices/deliver.ts loadNoticeSecret), never sent anywhere else.
 * `outRoot`: where a batch that names no folder of its own keeps its files (`<outRoot>/<batchId>`).
 */
export function createNoticeActivities(secret: string | undefined, outRoot: string) {
  return {
    composeNotice: (request: NoticeRequest): Promise<Notice> =>
      composeNotice({ ...request, outDir: request.outDir ?? resolveOut(outRoot, request.batchId) }),

    /** One attempt; resolves to the attempt's number once the receiver took the notice. */
    async deliverNotice({ id, url, notice }: { id: string; url: string; notice: Notice }): Promise<number> {
      try {
        await deliverOnce(id, url, notice, secret);
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
