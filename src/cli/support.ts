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

// Not an InvalidArgumentError: a bad value ends the command with this message and exit 1, as it always has.
/** A number >= 0 (`run` flags). */
export function nonNegative(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new Error(`"${value}" is not a non-negative number`);
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

/** Opens a session without a worker, runs `fn`, closes it; errors become exit codes. */
export async function withSession<T>(fn: (session: Session) => Promise<T>): Promise<T> {
  const session = await openSession({ worker: false }).catch(fail);
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
