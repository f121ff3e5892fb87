// Progress on a terminal: a live bar (cli-progress) on a TTY, a line every few seconds elsewhere (logs, CI).
import cliProgress from 'cli-progress';
import type { BatchProgress } from '../contract/progress';
import { formatDuration, rates } from '../workflows/progress-details';

export function progressLine(p: BatchProgress, now = Date.now()): string {
  const r = rates(p, now);
  const parts = [
    `${r.finished}/${p.total} done`,
    `${p.succeeded} ok`,
    `${p.failed} failed`,
    `${p.inFlight} in flight (window ${p.concurrency})`,
    `${p.total - p.started} pending`,
    `${r.perMinute.toFixed(1)}/min`,
    `ETA ${r.etaMs === null ? '?' : formatDuration(r.etaMs)}`,
  ];
  if (p.skipped) parts.push(`${p.skipped} done earlier`);
  if (p.reused) parts.push(`${p.reused} reused`);
  if (p.unknownSubmitRows) parts.push(`${p.unknownSubmitRows} may be billed twice`);
  // The workflow's clock in a query is its last task's time: compare with ours.
  if (p.holdUntil && p.holdUntil > now)
    parts.push(`HOLD: ${holdText(p.holdUntil, p.holdReason)} (${formatDuration(p.holdUntil - now)} left)`);
  else if (p.rateLimitedUntil && p.rateLimitedUntil > now)
    parts.push(`rate limited ${formatDuration(p.rateLimitedUntil - now)}`);
  if (p.capacityGate) parts.push(p.capacityGate);
  if (p.pausedReason) parts.push(`PAUSED: ${p.pausedReason}`);
  return parts.join(' · ');
}

/** "gateway asked to wait until 03:10 UTC": the batch's own reason when it gave one. */
function holdText(until: number, reason: string | null): string {
  if (reason) return reason.replace(/^the gateway/, 'gateway');
  return `gateway asked to wait until ${new Date(until).toISOString().slice(11, 16)} UTC`;
}

export interface ProgressView {
  update(p: BatchProgress): void;
  stop(): void;
}

export function createProgressView(stream: NodeJS.WriteStream = process.stderr): ProgressView {
  if (!stream.isTTY) {
    let last = 0;
    return {
      update(p) {
        if (Date.now() - last < 5000 && !p.done) return;
        last = Date.now();
        stream.write(`${progressLine(p)}\n`);
      },
      stop() {},
    };
  }
  const bar = new cliProgress.SingleBar(
    { format: '{bar} {percentage}% | {line}', hideCursor: true, stream, clearOnComplete: false },
    cliProgress.Presets.shades_classic,
  );
  let started = false;
  return {
    update(p) {
      const done = p.succeeded + p.failed;
      if (!started) bar.start(p.total, done, { line: progressLine(p) });
      started = true;
      bar.update(done, { line: progressLine(p) });
    },
    stop() {
      if (started) bar.stop();
    },
  };
}
