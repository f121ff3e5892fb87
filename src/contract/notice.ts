// Notices (`run --notify`): what the batch asks to be told, and what a receiver gets. Imported by workflow
// code: imports nothing.

/** What a notice tells: the batch ended (one of three ways), a guard rail stopped it, or it waits for a person. */
export type NoticeEvent = 'completed' | 'failed' | 'cancelled' | 'stopped' | 'paused' | 'late_video';

/** Why a batch paused, for the pauses a person must act on (an operator's own pause is not told). */
export type NoticePause = 'key' | 'breaker' | 'input' | 'recording';

/** What the batch workflow hands its notice: the facts it holds; the notice reads the rest from the files. */
export interface NoticeRequest {
  /** The notice's id (`webhook-id`): one event of one batch, the same on every delivery attempt. */
  id: string;
  event: NoticeEvent;
  batchId: string;
  /** The account it pays on (its memo), when known. */
  target?: string;
  csvPath: string;
  /** The batch's output folder as the worker sees it (its own, or `<out root>/<batchId>`). */
  outDir?: string;
  /** Why: the pause's or the guard rail's reason, or the failure's message. */
  reason?: string;
  pauseKind?: NoticePause;
  /** Where the batch stood (absent: a late video's, told after the batch ended: read from its manifest). */
  counts?: NoticeCounts;
  /** Where to deliver: each URL gets the same notice (a Slack incoming webhook a short text). */
  to: NoticeTo[];
  /** When the event happened (ISO), as the workflow saw it. */
  at: string;
}

export interface NoticeCounts {
  total: number;
  succeeded: number;
  failed: number;
  inFlight: number;
  notStarted: number;
  reused: number;
  skipped: number;
}

/**
 * Where notices go (`run --notify`), as a batch carries it: never the URL, which is a secret (a Slack URL's path
 * is its key), but how status and logs show it (its origin) and the reference the worker delivering a notice
 * reads the URL by, from the root holding the batch's folder (notices/notice-store.ts).
 */
export interface NoticeTo {
  shown: string;
  /** The URL's sha256 (hex, cut): its key under `<out root>/.notify/` or the store's. */
  ref?: string;
  /** The URL itself: only in batches started before references (their histories hold it already). */
  url?: string;
}

/** A notice's body (JSON), as a receiver gets it. */
export interface Notice {
  /** `batch.completed`, `batch.paused`, ...: the Standard Webhooks `type`. */
  type: string;
  timestamp: string;
  data: {
    batchId: string;
    target?: string;
    csv: string;
    /** completed | failed | cancelled | stopped | paused | late_video */
    event: NoticeEvent;
    reason?: string;
    counts: NoticeCounts;
    /** The spend ledger's figures (jobs made, kept, abandoned, unknown outcomes) and its one-line text. */
    spend?: Record<string, number | string>;
    /** The most frequent failure classes (error codes) and their rows. */
    failures: { code: string; rows: number }[];
    manifest?: string;
    report?: string;
    /** The command that comes next, as a person would type it. */
    next?: string;
  };
}

/** How one URL's delivery ended (`url` as shown: NoticeTo.shown). */
export interface NoticeDelivery {
  url: string;
  delivered: boolean;
  attempts: number;
  error?: string;
}

const NO_COUNTS: NoticeCounts = {
  total: 0,
  succeeded: 0,
  failed: 0,
  inFlight: 0,
  notStarted: 0,
  reused: 0,
  skipped: 0,
};

/** A notice with only what the batch handed over (its files could not be read). */
export function bareNotice(request: NoticeRequest): Notice {
  return {
    type: `batch.${request.event}`,
    timestamp: request.at,
    data: {
      batchId: request.batchId,
      ...(request.target ? { target: request.target } : {}),
      csv: request.csvPath,
      event: request.event,
      ...(request.reason ? { reason: request.reason } : {}),
      counts: request.counts ?? NO_COUNTS,
      failures: [],
    },
  };
}

/** The notice workflow of one event of a batch: its id is also the notice's `webhook-id`. */
export function noticeId(batchId: string, key: string): string {
  return `notice/${batchId}/${key}`;
}
