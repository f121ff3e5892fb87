// One notice of one batch event: composed once, then delivered to each URL with its own bounded retries. A
// workflow of its own (started by the batch, abandoned when the batch closes), so a batch that ends does not
// wait for a slow receiver, and a notice outlives the worker that started it.
import {
  ActivityFailure,
  ApplicationFailure,
  ChildWorkflowCancellationType,
  ParentClosePolicy,
  proxyActivities,
  startChild,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { RETRY_POLICIES } from '../contract/failures';
import { bareNotice, type NoticeDelivery, type NoticeRequest } from '../contract/notice';

const { composeNotice } = proxyActivities<Activities>({
  startToCloseTimeout: '1m',
  retry: RETRY_POLICIES.composeNotice,
});
const { deliverNotice } = proxyActivities<Activities>({
  // Each attempt's own HTTP timeout (notices/deliver.ts) is 10 s.
  startToCloseTimeout: '30s',
  retry: RETRY_POLICIES.deliverNotice,
});

export async function noticeWorkflow(request: NoticeRequest): Promise<NoticeDelivery[]> {
  const notice = await composeNotice(request).catch(() => bareNotice(request));
  return Promise.all(
    request.to.map(async (to): Promise<NoticeDelivery> => {
      const { shown } = to;
      try {
        // The URL is a secret: the worker reads it by its reference from the batch's root, so it is in no history.
        const attempts = await deliverNotice.executeWithOptions(
          { summary: `deliver ${notice.type} to ${shown}` },
          [
            {
              id: request.id,
              to,
              notice,
              batchId: request.batchId,
              ...(request.outDir ? { outDir: request.outDir } : {}),
            },
          ],
        );
        return { url: shown, delivered: true, attempts };
      } catch (err) {
        const cause = err instanceof ActivityFailure ? err.cause : undefined;
        const attempts = RETRY_POLICIES.deliverNotice.maximumAttempts;
        return {
          url: shown,
          delivered: false,
          attempts: cause instanceof ApplicationFailure && cause.nonRetryable ? 1 : attempts,
          error: cause?.message ?? (err as Error).message,
        };
      }
    }),
  );
}

/**
 * Starts the notice workflow of `request` (its id the notice's), left running when its starter closes: false
 * when it was started before (this event was told already: never twice).
 */
export async function startNotice(request: NoticeRequest): Promise<boolean> {
  try {
    await startChild(noticeWorkflow, {
      workflowId: request.id,
      args: [request],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      cancellationType: ChildWorkflowCancellationType.ABANDON,
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      staticSummary: `notice: batch ${request.event}`,
    });
    return true;
  } catch {
    return false;
  }
}
