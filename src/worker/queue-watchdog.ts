// Every worker process watches its gateway queue's limit so the queue is never stranded: a learner that was
// terminated or failed while the limit was 0 (a hold) leaves it at 0 for good, and a queue at 0 dispatches
// nothing, so no report would ever restart the learner. Every few seconds (an unref'd timer) the watchdog
// reads the queue's config; when the limit is 0 and the hold its reason names ended a little while ago (or
// the reason names no vidbatch hold), it signals-with-start the learner: a running one re-applies its limit,
// a dead one is replaced by a fresh one, seeded from the learned limit the reason carries. A queue with no
// limit at all (never learned) gets the learner's starting limit at once, without starting the learner: the
// learner starts on the first gateway dispatch, and until it applies a limit the server would dispatch
// everything queued at once.
import type { Client } from '@temporalio/client';
import type { Logger } from '@temporalio/common';
import { formatReason, parseReason, strandedHold, type QueueLimit } from '../contract/limit-reason';
import { describeQueueLimit, setQueueLimit } from '../activities/rate-budget';
import { INITIAL_RATE } from '../workflows/rate-learner';

export interface QueueWatchdogOptions {
  client: Client;
  namespace: string;
  gatewayQueue: string;
  /** Signals-with-start the learner (the nudge signal). */
  nudge: (why: string) => Promise<void>;
  logger: Logger;
  /** How often to look (default 5 s). */
  intervalMs?: number;
  /** How long past its end a hold may still show, while its learner applies the end (default 2 s). */
  graceMs?: number;
  /** Longest wait for the server per look (default 4 s). */
  deadlineMs?: number;
  /** This worker's `--gateway-rps`: the limit a queue with none gets (else the learner's slow start). */
  pinnedRps?: number;
}

export class QueueWatchdog {
  private timer: ReturnType<typeof setInterval> | undefined;
  private busy = false;
  private failing = false;
  private stranded = false;
  private stopped = false;

  constructor(private readonly options: QueueWatchdogOptions) {}

  start(): void {
    void this.check(); // at once: a queue with no limit must get one before the first dispatch
    this.timer = setInterval(() => void this.check(), this.options.intervalMs ?? 5000);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /** One look; never throws (a failure is logged once until a look succeeds again). */
  async check(): Promise<void> {
    if (this.busy || this.stopped) return;
    this.busy = true;
    const { client, logger, gatewayQueue } = this.options;
    const deadline = () => Date.now() + (this.options.deadlineMs ?? 4000);
    try {
      const limit = await client.connection.withDeadline(deadline(), () =>
        describeQueueLimit(client.workflowService, this.options.namespace, gatewayQueue),
      );
      if (limit.rps === null) {
        await client.connection.withDeadline(deadline(), () =>
          setQueueLimit(client.workflowService, this.options.namespace, client.options.identity, {
            gatewayQueue,
            // A pinned worker's first calls must not go faster than its pin while the learner starts.
            ...(this.options.pinnedRps !== undefined
              ? {
                  rps: this.options.pinnedRps,
                  reason: formatReason('pinned by an operator (--gateway-rps)', {
                    learned: this.options.pinnedRps,
                    pinned: this.options.pinnedRps,
                  }),
                }
              : {
                  rps: INITIAL_RATE,
                  reason: formatReason('slow start (no learner yet)', { learned: INITIAL_RATE }),
                }),
          }),
        );
      } else if (!strandedHold(limit, Date.now(), this.options.graceMs ?? 2000)) {
        this.stranded = false;
      } else {
        const why = describeStranded(limit);
        await client.connection.withDeadline(deadline(), () => this.options.nudge(why));
        // One line per stranded episode, not one per look while the learner gets to it.
        if (!this.stranded)
          logger.warn(
            `gateway queue ${gatewayQueue} ${why}: asked its rate-budget learner to restore the limit`,
          );
        this.stranded = true;
      }
      this.failing = false;
    } catch (err) {
      if (!this.failing && !this.stopped)
        logger.warn(`could not check the gateway queue ${gatewayQueue}'s rate limit (will keep trying)`, {
          error: err instanceof Error ? err.message : String(err),
        });
      this.failing = true;
    } finally {
      this.busy = false;
    }
  }
}

function describeStranded(limit: QueueLimit): string {
  const parsed = parseReason(limit.reason);
  if (typeof parsed.holdUntil === 'number') {
    const ago = Math.round((Date.now() - parsed.holdUntil) / 1000);
    return `was still at 0 requests/s ${ago} s after its hold ended (${new Date(parsed.holdUntil).toISOString()})`;
  }
  return `is at 0 requests/s with no hold end to wait for (reason: "${limit.reason}")`;
}
