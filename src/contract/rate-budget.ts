// One gateway rate budget per task queue, held by Temporal (docs/rate-budget.md): the gateway calls run on
// their own activity task queue, whose server-side rate limit is the budget; one learner workflow per gateway
// queue sets that limit from what every worker reports. Imported by workflow code: no Node built-ins.
import type { ActivityOptions } from '@temporalio/common';
import { defineQuery, defineSignal } from '@temporalio/workflow';

/** The activities that call the gateway: only these run on the gateway queue. */
export const GATEWAY_ACTIVITIES = ['enhancePrompt', 'submitJob', 'checkJob', 'pollJob', 'stopJob'] as const;

/**
 * The gateway activity queue of a task queue. One gateway key per task queue: the queue's limit is the budget
 * of the key the workers on it use, so workers with different keys need different task queues.
 */
export function gatewayQueue(taskQueue: string): string {
  return `${taskQueue}-gateway`;
}

/** The learner of a gateway queue: one per queue, started by whichever worker signals it first. */
export function rateBudgetWorkflowId(gatewayTaskQueue: string): string {
  return `vidbatch-rate-budget:${gatewayTaskQueue}`;
}

/** Temporal's priority keys run 1 (first) to 5. Spare status checks (workflows/first-check.ts) go last: only budget no other call is waiting for. */
export const SPARE_PRIORITY = 5;

/**
 * A row's submit after one that brought no job (a 429, a capacity refusal, an unknown outcome) goes one priority
 * ahead of its batch's other calls. At the same priority it would wait its turn again behind every call queued
 * meanwhile: the gateway queue is first come first served within a batch, and at a busy gateway's limit it holds
 * 30 s and more of submits and status checks (a row refused twice went out a minute late). A batch of priority 1
 * has no level ahead of it: its resubmits wait their turn.
 */
export function resubmitPriority(priority: number): number {
  return Math.max(1, priority - 1);
}

const MAX_FAIRNESS_KEY = 64; // bytes, per the server

/** FNV-1a, 32 bits: a short, deterministic tag for ids longer than a fairness key may be. */
function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/** The batch id as a fairness key: as is when it fits in 64 ASCII bytes, else a prefix plus a hash of it. */
export function fairnessKey(batchId: string): string {
  // eslint-disable-next-line no-control-regex
  if (batchId.length <= MAX_FAIRNESS_KEY && /^[\x00-\x7f]*$/.test(batchId)) return batchId;
  const ascii = batchId.replace(/[^\x20-\x7e]/g, '_');
  return `${ascii.slice(0, MAX_FAIRNESS_KEY - 9)}~${fnv1a(batchId)}`;
}

export interface GatewayActivityOptionsInput {
  /** The worker's task queue (VIDBATCH_TASK_QUEUE); the gateway queue is derived from it. */
  taskQueue: string;
  batchId: string;
  /** `run --priority`: 1 (first) to 5. */
  priority: number;
  /** `run --weight`: the batch's share relative to others of the same priority. */
  weight: number;
}

/**
 * What a workflow adds to the ActivityOptions of submitJob and pollJob: the gateway queue, and the batch's
 * fairness key, weight and priority. Eager dispatch is off too (it would skip the queue's limit; it cannot
 * apply to another queue anyway).
 */
export function gatewayActivityOptions(
  input: GatewayActivityOptionsInput,
): Required<Pick<ActivityOptions, 'taskQueue' | 'priority' | 'allowEagerDispatch'>> {
  return {
    taskQueue: gatewayQueue(input.taskQueue),
    allowEagerDispatch: false,
    priority: {
      fairnessKey: fairnessKey(input.batchId),
      fairnessWeight: input.weight,
      priorityKey: input.priority,
    },
  };
}

/** Gateway calls one worker made since its last report. */
export interface RateReport {
  /** The worker's identity, for the learner's per-worker view. */
  worker: string;
  /** Gateway activity attempts dispatched to this worker (each took a token of the queue's limit). */
  dispatched: number;
  /** Requests answered by the gateway (anything but 429), by kind. */
  answered: { submit: number; status: number };
  /** Requests answered 429, by kind. */
  rateLimited: { submit: number; status: number };
  /** The longest Retry-After among those 429s (ms). */
  retryAfterMs: number;
  /** Dispatches by fairness key (the batch id, see fairnessKey); absent when none carried one. */
  byBatch?: Record<string, number>;
}

/** One batch's part of the gateway calls over the last half minute (`status`, the learner's UI details). */
export interface BatchShare {
  /** The batch's fairness key: its id (a prefix and a hash when over 64 bytes). */
  batch: string;
  dispatched: number;
  /** Of all the queue's dispatches in the window, 0..1. */
  share: number;
  /** Dispatches per second. */
  rps: number;
}

/**
 * A limit an operator set (`worker --gateway-rps`, VIDBATCH_GATEWAY_RPS), or null to let the learner learn; or,
 * `by: 'gateway'`, the limit the gateway publishes in its headers (gateway/rate-limit-headers.ts), a little under
 * it. An operator's pin wins over the gateway's.
 */
export interface PinRate {
  worker: string;
  rps: number | null;
  by?: 'gateway';
}

/** A worker's watchdog found the queue at 0 past its hold's end (or an unknown 0): re-apply the target. */
export interface Nudge {
  worker: string;
  why: string;
}

/** The learner's durable state, carried across continue-as-new. */
export interface LearnerState {
  /** The learned limit (rps) outside a hold. */
  limit: number;
  /** The rate at which the last 429 hit; undefined until the first one (slow start). */
  ceiling?: number;
  /** When the limit was last cut (epoch ms). */
  cutAt: number;
  /** Quiet time after a cut before probing upwards (doubles while 429s confirm the same ceiling). */
  plateauMs: number;
  confirmations: number;
  /** Epoch ms until which the queue is held at 0 rps (the gateway's Retry-After). */
  holdUntil: number;
  pinned: number | null;
  /** Set when `pinned` is the gateway's published limit rather than an operator's. */
  pinnedBy?: 'gateway';
}

export interface RateBudgetInput {
  gatewayQueue: string;
  /** Carried across continue-as-new. */
  state?: LearnerState;
}

/** What the learner shows (query `rateBudget`). */
export interface RateBudgetSnapshot {
  gatewayQueue: string;
  /** The limit the queue has now (0 during a hold), as last applied to the server. */
  applied: number | null;
  state: LearnerState;
  /** Requests/second the workers reported over the last few seconds. */
  dispatchRate: number;
  reports: number;
  rateLimited: number;
  /** Each batch's share of the gateway calls over the last 30 s. */
  batches?: BatchShare[];
  /** Why the limit is what it is (the reason written with it on the server). */
  why?: string;
}

export const rateReportSignal = defineSignal<[RateReport]>('rateReport');
export const pinRateSignal = defineSignal<[PinRate]>('pinRate');
export const nudgeSignal = defineSignal<[Nudge]>('nudge');
export const rateBudgetQuery = defineQuery<RateBudgetSnapshot>('rateBudget');
