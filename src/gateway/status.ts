// Job statuses are an open set (the seed shows only `queued` and `completed`): synonyms map to the canonical
// states, and anything else is `unknown`, which callers treat as "not finished yet" and report. `gone` is a
// status that says the gateway no longer knows the job: the literal `UNKNOWN` is what one provider answers
// for a task past its 24 h, where others answer 404.

export type CanonicalStatus = 'queued' | 'running' | 'completed' | 'failed' | 'gone' | 'unknown';

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
  gone: ['unknown', 'not_found', 'notfound', 'gone', 'deleted', 'purged'],
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
