// Job statuses are an open set (the seed shows only `queued` and `completed`): synonyms map to the canonical
// states, and anything else is `unknown`, which callers treat as "not finished yet" and report.

export type CanonicalStatus = 'queued' | 'running' | 'completed' | 'failed' | 'unknown';

const SYNONYMS: Record<Exclude<CanonicalStatus, 'unknown'>, string[]> = {
  queued: ['queued', 'pending', 'submitted', 'created', 'waiting', 'in_queue', 'scheduled'],
  running: ['running', 'processing', 'in_progress', 'started', 'generating'],
  completed: ['completed', 'succeeded', 'success', 'successful', 'done', 'finished', 'complete'],
  failed: [
    'failed',
    'failure',
    'error',
    'errored',
    'canceled',
    'cancelled',
    'rejected',
    'expired',
    'timed_out',
    'timeout',
  ],
};

const LOOKUP = new Map<string, CanonicalStatus>(
  Object.entries(SYNONYMS).flatMap(([canonical, names]) =>
    names.map((n) => [n, canonical as CanonicalStatus]),
  ),
);

export function canonicalStatus(raw: string): CanonicalStatus {
  return (
    LOOKUP.get(
      raw
        .trim()
        .toLowerCase()
        .replace(/[\s-]+/g, '_'),
    ) ?? 'unknown'
  );
}
