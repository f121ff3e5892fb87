// The batch's notices (`run --notify`): each event starts a notice workflow (workflows/notice.ts) of its own,
// abandoned when the batch closes, so the batch never waits on a receiver and a notice outlives the run. Its
// id names the batch's execution (a re-run of a finished batch is told again) and the event (the n-th pause),
// so one event is told once whatever replays or retries.
import { workflowInfo } from '@temporalio/workflow';
import type { BatchInput } from '../contract/batch';
import { noticeId, type NoticeEvent, type NoticePause, type NoticeRequest } from '../contract/notice';
import type { BatchState } from './batch-state';
import { startNotice } from './notice';

export type Notify = (
  event: NoticeEvent,
  detail?: { reason?: string; pauseKind?: NoticePause; n?: number },
) => Promise<void>;

const MANIFEST_SUFFIX = '/manifest.jsonl';

/** `pending.starts` counts the starts on their way (a run continues as new only without any). */
export function batchNotices(input: BatchInput, state: BatchState, pending: { starts: number }): Notify {
  const to = input.options.notify ?? [];
  return async (event, detail = {}) => {
    if (!to.length) return;
    const info = workflowInfo();
    const key = `${info.firstExecutionRunId.slice(0, 8)}-${event}${detail.n ? `-${detail.n}` : ''}`;
    const id = noticeId(input.batchId, key);
    const p = state.progress(Date.now());
    const outDir =
      input.options.outDir ??
      (state.manifestPath.endsWith(MANIFEST_SUFFIX)
        ? state.manifestPath.slice(0, -MANIFEST_SUFFIX.length)
        : undefined);
    const target = info.memo?.target;
    const request: NoticeRequest = {
      id,
      event,
      batchId: input.batchId,
      ...(typeof target === 'string' ? { target } : {}),
      csvPath: input.csvPath,
      ...(outDir ? { outDir } : {}),
      ...(detail.reason ? { reason: detail.reason } : {}),
      ...(detail.pauseKind ? { pauseKind: detail.pauseKind } : {}),
      counts: {
        total: p.total,
        succeeded: p.succeeded,
        failed: p.failed,
        inFlight: p.inFlight,
        notStarted: p.total - p.started,
        reused: p.reused,
        skipped: p.skipped,
      },
      to,
      at: new Date().toISOString(),
    };
    pending.starts += 1;
    try {
      if (await startNotice(request)) state.noticeStarted(id);
    } finally {
      pending.starts -= 1;
      state.changed();
    }
  };
}
