// What the commands share: exit codes, errors that become an exit code, number parsers, the session of an
// operator command, the one-line summary of a finished batch. Loaded by `--help` too: no heavy module here.
import { type Command, InvalidArgumentError, type Option } from 'commander';
import type { Session } from '../client/session';
import type { BatchResult } from '../contract/batch';
import { EXIT, exitCodeFor } from '../errors';

export { EXIT };

/**
 * An error with an exit code of its own (bad input or settings: 2) ends the command now, with its message and
 * that code, before anything else runs; anything else goes on to the last-resort handler (exit 1).
 */
export function fail(err: unknown): never {
  const code = exitCodeFor(err);
  if (code !== EXIT.error) {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(code);
  }
  throw err;
}

/** What a numeric flag accepts: whole or not, at least `min` (or more than `above`), at most `max`. */
interface Range {
  whole?: boolean;
  min?: number;
  above?: number;
  max?: number;
}

function describe({ whole, min, above, max }: Range): string {
  const kind = whole ? 'a whole number' : 'a number';
  if (min !== undefined && max !== undefined) return `${kind} from ${min} to ${max}`;
  if (above !== undefined) return `${kind} > ${above}`;
  if (min !== undefined) return `${kind} >= ${min}`;
  return kind;
}

/**
 * The one way numeric flags are read: a parser that refuses anything outside its range. Commander reports a
 * refusal as "option '--page-size <n>' argument '0' is invalid. must be a whole number >= 1"
 * (or "value '70000' from env 'VIDBATCH_REVIEW_PORT'"), and the program exits 2 before anything starts.
 */
export function numberIn(range: Range): (value: string) => number {
  return (value) => {
    const n = value.trim() === '' ? NaN : Number(value);
    const ok =
      Number.isFinite(n) &&
      (!range.whole || Number.isInteger(n)) &&
      (range.min === undefined || n >= range.min) &&
      (range.above === undefined || n > range.above) &&
      (range.max === undefined || n <= range.max);
    if (!ok) throw new InvalidArgumentError(`must be ${describe(range)}`);
    return n;
  };
}

/** Any finite number. */
export const number = numberIn({});
/** A number >= 0. */
export const nonNegative = numberIn({ min: 0 });
/** A number > 0. */
export const positive = numberIn({ above: 0 });
/** A whole number >= 0 (counts). */
export const wholeNumber = numberIn({ whole: true, min: 0 });
/** A whole number >= 1. */
export const positiveWhole = numberIn({ whole: true, min: 1 });
/** A share between 0 and 1 (also a probability). */
export const fraction = numberIn({ min: 0, max: 1 });
/** A TCP port; 0 lets the system choose. */
export const port = numberIn({ whole: true, min: 0, max: 65_535 });
/** Seconds >= 0 on the command line, milliseconds in the options. */
export const seconds = (value: string) => nonNegative(value) * 1000;
/** Seconds > 0 (a timeout or deadline of 0 would mean none at all). */
export const positiveSeconds = (value: string) => positive(value) * 1000;

const DURATION_UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3600_000, d: 86_400_000 };

/**
 * A duration >= 0, in milliseconds: seconds (`90`), or a number with a unit (`30s`, `90m`, `24h`, `2d`).
 * Refused like any other flag (exit 2) when it is neither.
 */
export function duration(value: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$/i.exec(value);
  if (!m)
    throw new InvalidArgumentError(
      'must be a duration: seconds, or a number with a unit (30s, 90m, 24h, 2d)',
    );
  return Math.round(Number(m[1]) * DURATION_UNITS[(m[2] || 's').toLowerCase()]!);
}

/** "24 h", "90 min", "45 s": a duration as the summaries say it. */
export function durationText(ms: number): string {
  if (ms >= 3600_000 && ms % 3600_000 === 0) return `${ms / 3600_000} h`;
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${Math.round(ms / 100) / 10} s`;
}

export function waitForCtrlC(): Promise<void> {
  return new Promise((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
}

/**
 * `alias` (e.g. `--out`) as a hidden second name of the option stored as `target` (e.g. `outRoot`): the name
 * of an earlier release, still accepted so scripts keep working, not shown in `--help`.
 */
export function hiddenAlias(command: Command, alias: Option, target: string): Command {
  command.addOption(alias.hideHelp());
  command.on(`option:${alias.name()}`, (value: unknown) =>
    command.setOptionValueWithSource(target, value, 'cli'),
  );
  return command;
}

/** The `<batch>` argument of the operator commands. */
export const batchArg = ['<batch>', 'batch id (batch-...) or the CSV the batch was made from'] as const;

/**
 * An operator command's session: no worker; the server a `vidbatch run` or `vidbatch server` runs here (never
 * the database it holds), else the database opened for this command only. Runs `fn`, closes it.
 */
export async function withSession<T>(fn: (session: Session) => Promise<T>): Promise<T> {
  const { openSession } = await import('../client/session');
  const session = await openSession({ worker: false, localServer: 'operator' }).catch(fail);
  try {
    return await fn(session);
  } finally {
    await session.close();
  }
}

/**
 * withSession, with the batch `ref` names resolved in it: a batch id, or the CSV it was made from (client/batches.ts
 * resolveBatchId; this environment's gateway target and root pick among several batches of one CSV).
 */
export async function withBatch<T>(
  ref: string,
  fn: (session: Session, batchId: string) => Promise<T>,
  outRoot?: string,
): Promise<T> {
  const [{ resolveBatchId }, { environmentTarget }] = await Promise.all([
    import('../client/batches'),
    import('../config'),
  ]);
  const env = process.env;
  const root = env.VIDBATCH_STORE || outRoot || env.VIDBATCH_OUT_ROOT || 'out';
  const target = environmentTarget(env);
  return withSession(async (s) => {
    const scope = target ? { target, root } : undefined;
    const batchId = await resolveBatchId(ref, s.client, { ...(scope ? { scope } : {}), outRoot: root });
    return fn(s, batchId);
  });
}

/** "9 succeeded, 1 failed of 10", and where the manifest is when asked. */
export function summaryLine(
  result: Pick<BatchResult, 'succeeded' | 'failed' | 'total'> & { manifestPath?: string },
  withManifest = false,
): string {
  const counts = `${result.succeeded} succeeded, ${result.failed} failed of ${result.total}`;
  return withManifest ? `${counts}. Manifest: ${result.manifestPath}` : counts;
}

/**
 * What a user must know about spend after a batch (or while it runs): rows that may have been billed more than
 * once (a submit with an unknown outcome), rows an earlier run had already finished (not submitted again), rows
 * recorded from another batch's job for the same request.
 */
export function spendSafetyLines(figures: {
  unknownSubmitRows?: number;
  skipped?: number;
  reused?: number;
}): string[] {
  const lines: string[] = [];
  const unknown = figures.unknownSubmitRows ?? 0;
  if (unknown > 0)
    lines.push(
      `${unknown} ${unknown === 1 ? 'row' : 'rows'} had a submit with an unknown outcome and may have been billed more than once; see unknownSubmits in the manifest`,
    );
  const skipped = figures.skipped ?? 0;
  if (skipped > 0)
    lines.push(
      `${skipped} ${skipped === 1 ? 'row was' : 'rows were'} skipped: an earlier run of this batch already finished ${skipped === 1 ? 'it' : 'them'} (not submitted again)`,
    );
  const reused = figures.reused ?? 0;
  if (reused > 0)
    lines.push(
      `${reused} ${reused === 1 ? 'row reuses a video' : 'rows reuse videos'} another batch in this output root paid for (the same request; no new job): reusedFrom in the manifest names the batch and row; \`run --fresh\` pays again`,
    );
  return lines;
}

/** "2 videos arrived late, ...", or undefined for none. */
export function arrivedLateLine(arrived: number): string | undefined {
  if (arrived <= 0) return undefined;
  return `${arrived} ${arrived === 1 ? 'video' : 'videos'} arrived late, after ${arrived === 1 ? 'its row' : 'their rows'} ended (deadline_exceeded or cancelled): kept as succeeded (arrivedLate in the manifest)`;
}

/**
 * What a user must know about late videos (docs/spend-safety.md#late-videos): videos that arrived after their
 * rows ended, and jobs of ended rows that may still finish, with how they will be fetched: `checkedBy` says who
 * checks them (`workers`: a deployment's, on their own; `here`: only while a worker runs in this folder,
 * as after `run` on the embedded server; `none`: --late-for 0).
 */
export function lateVideoLines(
  figures: { arrivedLate?: number; lateJobs?: number },
  o: { batchId: string; lateForMs: number; checkedBy: 'workers' | 'here' | 'none' },
): string[] {
  const arrived = arrivedLateLine(figures.arrivedLate ?? 0);
  const lines = arrived ? [arrived] : [];
  const due = figures.lateJobs ?? 0;
  if (due === 0) return lines;
  const jobs = `${due} ${due === 1 ? 'job' : 'jobs'} passed ${due === 1 ? 'its' : 'their'} deadline or ${due === 1 ? 'was' : 'were'} cancelled and may still finish (and be billed)`;
  const fetch = `\`vidbatch download ${o.batchId}\` fetches what arrived`;
  const window = durationText(o.lateForMs);
  if (o.checkedBy === 'none' || o.lateForMs <= 0)
    lines.push(`${jobs}: not checked any more (--late-for 0); ${fetch}`);
  else if (o.checkedBy === 'workers')
    lines.push(
      `${jobs}: the workers check them for ${window} after their rows ended and keep any video that arrives (\`vidbatch status ${o.batchId}\` counts them)`,
    );
  else
    lines.push(
      `${jobs}: vidbatch checks them for ${window} after their rows ended while a worker runs here (the next \`vidbatch run\` in this folder, or \`vidbatch worker\`), keeping any video that arrives; meanwhile ${fetch}`,
    );
  return lines;
}
