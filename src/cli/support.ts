// What the commands share: exit codes, errors that become an exit code, number parsers, the session of an
// operator command, the one-line summary of a finished batch.
import { InvalidArgumentError } from 'commander';
import { openSession, type Session } from '../client/session';
import type { BatchResult } from '../contract/types';
import { ConfigError, CsvValidationError } from '../errors';

/** Exit codes: documented in the README. */
export const EXIT = { ok: 0, error: 1, invalidInput: 2, rowsFailed: 3, interrupted: 130 } as const;

/** Bad input or settings exit with 2 and their message; anything else goes on to the generic handler (exit 1). */
export function fail(err: unknown): never {
  if (err instanceof CsvValidationError || err instanceof ConfigError) {
    console.error(err.message);
    process.exit(EXIT.invalidInput);
  }
  throw err;
}

/** Any finite number; a bad value is a usage error reported by commander (`server`, `simulator`). */
export function number(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n)) throw new InvalidArgumentError('not a number');
  return n;
}

/** A number >= 0 (`run` flags). */
export function nonNegative(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError('not a number >= 0');
  return n;
}

/** A whole number >= 0 (counts). */
export function wholeNumber(value: string): number {
  const n = nonNegative(value);
  if (!Number.isInteger(n)) throw new InvalidArgumentError('not a whole number');
  return n;
}

/** A share between 0 and 1. */
export function fraction(value: string): number {
  const n = nonNegative(value);
  if (n > 1) throw new InvalidArgumentError('not a share between 0 and 1 (0.2 = 20%)');
  return n;
}

/** Seconds on the command line, milliseconds in the options. */
export const seconds = (value: string) => nonNegative(value) * 1000;

export function waitForCtrlC(): Promise<void> {
  return new Promise((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
}

/** The `<batch>` argument of the operator commands. */
export const batchArg = ['<batch>', 'batch id (batch-...) or the CSV the batch was made from'] as const;

/**
 * An operator command's session: no worker; the server a `vidbatch run` or `vidbatch server` runs here (never
 * the database it holds), else the database opened for this command only. Runs `fn`, closes it.
 */
export async function withSession<T>(fn: (session: Session) => Promise<T>): Promise<T> {
  const session = await openSession({ worker: false, localServer: 'operator' }).catch(fail);
  try {
    return await fn(session);
  } finally {
    await session.close();
  }
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
 * once (a submit with an unknown outcome), rows an earlier run had already finished (not submitted again).
 */
export function spendSafetyLines(figures: { unknownSubmitRows?: number; skipped?: number }): string[] {
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
  return lines;
}
