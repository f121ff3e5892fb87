// How a batch's notices went, for `status` and `run`: each notice is a workflow of its own (workflows/
// notice.ts), its result the deliveries; one still running shows its attempt and the last refusal.
import type { Client } from '@temporalio/client';
import type { NoticeDelivery } from '../contract/notice';

export interface NoticeOutcome {
  id: string;
  /** `completed`, `paused-2`, ...: the part of the id after the execution's tag. */
  event: string;
  state: 'sending' | 'ended' | 'unknown';
  /** Once ended: each URL's delivery. */
  deliveries?: NoticeDelivery[];
  /** While sending: the attempt under way, and why the last one failed. */
  attempt?: number;
  lastFailure?: string;
}

/** The outcome of each notice (ids as the batch's progress or result lists them). */
export async function noticeOutcomes(client: Client, ids: readonly string[]): Promise<NoticeOutcome[]> {
  return Promise.all(
    ids.map(async (id): Promise<NoticeOutcome> => {
      const event = id.slice(id.lastIndexOf('/') + 1).replace(/^[0-9a-f]{8}-/, '');
      const handle = client.workflow.getHandle(id);
      try {
        const { status, raw } = await handle.describe();
        if (status.name === 'COMPLETED')
          return { id, event, state: 'ended', deliveries: (await handle.result()) as NoticeDelivery[] };
        if (status.name !== 'RUNNING') return { id, event, state: 'unknown' };
        const pending = raw.pendingActivities?.[0];
        return {
          id,
          event,
          state: 'sending',
          ...(pending?.attempt ? { attempt: pending.attempt } : {}),
          ...(pending?.lastFailure?.message ? { lastFailure: pending.lastFailure.message } : {}),
        };
      } catch {
        // Forgotten by the server (retention), or never started.
        return { id, event, state: 'unknown' };
      }
    }),
  );
}

/** "notice completed: delivered to http://host/… (attempt 3)", one line per URL. */
export function noticeLines(outcomes: readonly NoticeOutcome[]): string[] {
  return outcomes.flatMap((o) => {
    if (o.state === 'sending')
      return [
        `notice ${o.event}: sending (attempt ${o.attempt ?? 1}${o.lastFailure ? `; the last one: ${o.lastFailure}` : ''})`,
      ];
    if (o.state === 'unknown') return [`notice ${o.event}: not known to the server any more`];
    return (o.deliveries ?? []).map((d) =>
      d.delivered
        ? `notice ${o.event}: delivered to ${d.url} (attempt ${d.attempts})`
        : `notice ${o.event}: NOT delivered to ${d.url} after ${d.attempts} attempt${d.attempts === 1 ? '' : 's'}: ${d.error ?? 'no reason given'}`,
    );
  });
}
