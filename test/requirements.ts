// What some test files need beyond `npm ci` (a browser, the self-hosted cluster). A newcomer's `npm test`
// must pass without them: their tests skip, with one line saying what to install or start. CI must have
// them: under CI=true a missing one is a failing test, not a silent skip.
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { describe, it } from 'vitest';

export const IN_CI = process.env.CI === 'true';

export interface Requirement {
  /** Short tag of the log line, e.g. `browser`. */
  tag: string;
  /** What is missing, e.g. `no Chromium found`. */
  missing: string;
  /** What to do about it on a developer's machine. */
  remedy: string;
  /** What a missing requirement means under CI=true, where it must be there (default: `remedy`). */
  inCi?: string;
}

/**
 * True when `met`. Otherwise prints one line and returns false (the caller skips its tests), or under
 * CI=true also defines a test that fails with the reason. Call it at the top level of a test file.
 */
export function required(met: boolean, r: Requirement): boolean {
  if (met) return true;
  if (IN_CI) {
    const reason = `${r.missing} under CI=true: ${r.inCi ?? r.remedy}`;
    console.log(`[${r.tag}] ${reason}; failing`);
    describe(`${r.tag} in CI`, () => {
      it('is available', () => {
        throw new Error(reason);
      });
    });
  } else {
    console.log(`[${r.tag}] skipped: ${r.missing}. ${r.remedy}`);
  }
  return false;
}

export function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The Chromium to drive with playwright-core: CHROMIUM_PATH if set, else `chromium` on the PATH. */
export function findChromium(): string | undefined {
  const set = process.env.CHROMIUM_PATH;
  if (set) return executable(set) ? set : undefined;
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/bin'];
  for (const name of ['chromium', 'chromium-browser']) {
    const found = dirs
      .filter(Boolean)
      .map((d) => join(d, name))
      .find(executable);
    if (found) return found;
  }
  return undefined;
}

/** Chromium for tests that drive a browser: its path, or undefined after `required` said what to install. */
export function requireChromium(): string | undefined {
  const path = findChromium();
  const met = required(path !== undefined, {
    tag: 'browser',
    missing: process.env.CHROMIUM_PATH
      ? `CHROMIUM_PATH=${process.env.CHROMIUM_PATH} is not an executable`
      : 'no Chromium found',
    remedy: 'Install it with `apt-get install chromium` (or set CHROMIUM_PATH to one) to run these tests',
    inCi: '.ci/run installs it with `apt-get install chromium`; see its output',
  });
  return met ? path : undefined;
}
