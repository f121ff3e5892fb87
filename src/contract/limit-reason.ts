// The reason the learner writes with the gateway queue's limit, and reading it back. The server keeps only a
// number and this string (`temporal task-queue config get` shows both), so the string carries what a new
// learner needs to start where the last one stopped, and what a worker's watchdog needs to tell a hold that
// should have ended: "vidbatch: settled under a 429 at 5.13 rps (learned 4.62 rps, ceiling 5.13, confirmed 1)".
// Imported by workflow code: no Node built-ins.

/** What a learner carries over in the reason (the rest of its state starts afresh). */
export interface ReasonState {
  /** The learned limit outside a hold. */
  learned: number;
  ceiling?: number;
  confirmations?: number;
  pinned?: number;
}

export const REASON_PREFIX = 'vidbatch:';
const HOLD = 'gateway Retry-After, held until ';

/** `what` (e.g. "slow start (no 429 yet)") followed by the state a new learner is seeded from. */
export function formatReason(what: string, state: ReasonState): string {
  const parts = [`learned ${state.learned.toFixed(2)} rps`];
  if (state.ceiling !== undefined) parts.push(`ceiling ${state.ceiling.toFixed(2)}`);
  if (state.confirmations) parts.push(`confirmed ${state.confirmations}`);
  if (state.pinned !== undefined) parts.push(`pinned ${state.pinned}`);
  return `${REASON_PREFIX} ${what} (${parts.join(', ')})`;
}

/** The reason of a hold (limit 0) until `until` (epoch ms). */
export function holdReason(until: number, state: ReasonState): string {
  return formatReason(`${HOLD}${new Date(until).toISOString()}`, state);
}

export interface ParsedReason {
  /** Written by vidbatch (any version). */
  vidbatch: boolean;
  /** The end of a hold (epoch ms); null when the reason names a hold whose end cannot be read. */
  holdUntil?: number | null;
  /** Absent in reasons someone else wrote. */
  state?: ReasonState;
}

const num = (text: string, name: string): number | undefined => {
  const m = new RegExp(`\\b${name} (\\d+(?:\\.\\d+)?)`).exec(text);
  return m ? Number(m[1]) : undefined;
};

export function parseReason(reason: string | null | undefined): ParsedReason {
  const text = reason ?? '';
  if (!text.startsWith(REASON_PREFIX)) return { vidbatch: false };
  const parsed: ParsedReason = { vidbatch: true };
  const hold = text.indexOf(HOLD);
  if (hold >= 0) {
    const iso = /^\S+/.exec(text.slice(hold + HOLD.length))?.[0] ?? '';
    const at = Date.parse(iso);
    parsed.holdUntil = Number.isFinite(at) ? at : null;
  }
  // The trailer: the last parenthesis that starts with "learned".
  const trailer = /\((learned [^()]*)\)\s*$/.exec(text)?.[1];
  const learned = trailer === undefined ? undefined : num(trailer, 'learned');
  if (trailer !== undefined && learned !== undefined && learned > 0) {
    const state: ReasonState = { learned };
    const ceiling = num(trailer, 'ceiling');
    const confirmations = num(trailer, 'confirmed');
    const pinned = num(trailer, 'pinned');
    if (ceiling !== undefined && ceiling > 0) state.ceiling = ceiling;
    if (confirmations !== undefined) state.confirmations = Math.floor(confirmations);
    if (pinned !== undefined && pinned > 0) state.pinned = pinned;
    parsed.state = state;
  }
  return parsed;
}

/** The gateway queue's limit as the server keeps it: rps null when none is set. */
export interface QueueLimit {
  rps: number | null;
  reason: string;
}

/**
 * A queue stranded at 0: a vidbatch hold that ended more than `graceMs` ago (or whose end cannot be read),
 * or a 0 someone else set. Its learner should be running and restoring it; a worker's watchdog nudges it.
 */
export function strandedHold(limit: QueueLimit, now: number, graceMs: number): boolean {
  if (limit.rps !== 0) return false;
  const parsed = parseReason(limit.reason);
  if (!parsed.vidbatch || parsed.holdUntil === undefined || parsed.holdUntil === null) return true;
  return parsed.holdUntil < now - graceMs;
}
