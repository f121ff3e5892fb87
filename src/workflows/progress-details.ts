// Progress figures and the batch's "current details" markdown shown in the Temporal Web UI. Pure functions:
// used by the workflow (deterministic) and by the CLI.
import type { BatchProgress } from '../contract/progress';

export interface Rates {
  finished: number;
  /** Prompts finished per minute since the batch started. */
  perMinute: number;
  /** Estimated ms left, or null before the first prompt finishes. */
  etaMs: number | null;
}

export function rates(p: BatchProgress, now: number): Rates {
  const finished = p.succeeded + p.failed;
  const minutes = Math.max((now - p.startedAt) / 60_000, 1 / 60);
  const perMinute = finished / minutes;
  return { finished, perMinute, etaMs: perMinute > 0 ? ((p.total - finished) / perMinute) * 60_000 : null };
}

export function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

export function progressMarkdown(p: BatchProgress, now: number = Date.now()): string {
  const r = rates(p, now);
  const lines = [
    `**${r.finished} / ${p.total}** finished: ${p.succeeded} succeeded, ${p.failed} failed`,
    `In flight: ${p.inFlight} (window ${p.concurrency}) · pending: ${p.total - p.started}`,
    `Rate: ${r.perMinute.toFixed(1)}/min · ETA: ${r.etaMs === null ? 'unknown' : formatDuration(r.etaMs)}`,
  ];
  if (p.skipped) lines.push(`Already done in an earlier run (not submitted again): ${p.skipped}`);
  if (p.unknownSubmitRows)
    lines.push(
      `**Rows that may have been billed more than once** (a submit's outcome was unknown): ${p.unknownSubmitRows}`,
    );
  if (p.holdUntil && p.holdUntil > now)
    lines.push(
      `**Holding:** ${p.holdReason ?? 'the gateway asked to wait'} (${formatDuration(p.holdUntil - now)} left)`,
    );
  else if (p.rateLimitedUntil && p.rateLimitedUntil > now)
    lines.push(`Rate limited: new submissions held for ${formatDuration(p.rateLimitedUntil - now)}`);
  if (p.capacityGate) lines.push(`**Waiting for the gateway:** ${p.capacityGate}`);
  if (p.pausedReason) lines.push(`**Paused:** ${p.pausedReason} (${p.blocked} prompts waiting)`);
  return lines.join('\n\n');
}
