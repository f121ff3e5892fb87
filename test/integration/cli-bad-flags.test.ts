// Bad settings are refused before anything is sent: the real `vidbatch`, spawned with values out of range on
// the command line and in the environment, exits 2 naming the flag (or variable), the value and the range,
// before it opens a server, a worker or the CSV. Variables that set batch options in earlier releases are not
// read any more, and a user who still sets one is told which flag to use.
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { vidbatch } from './cli-helpers';

describe('bad settings are refused (spawned vidbatch)', () => {
  it('exits 2 naming the flag, the value and the range; nothing starts', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-flags-'));
    await writeFile(join(dir, 'p.csv'), 'prompt\na red kite\n');
    const cases: [string[], Record<string, string>, RegExp][] = [
      [
        ['run', 'p.csv', '--concurrency', '0'],
        {},
        /'--concurrency <n>' argument '0' is invalid\. must be a whole number of at least 1/,
      ],
      [
        ['run', 'p.csv', '--concurrency', '2001'],
        {},
        /'--concurrency <n>' argument '2001' is invalid\. must be at most 2000: a Temporal server accepts at most 2000 pending child workflows per workflow \(limit\.numPendingChildExecutions\.error\)/,
      ],
      [
        ['set-concurrency', 'batch-0000000000000000', '5000'],
        {},
        /value '5000' is invalid for argument 'n'\. must be at most 2000/,
      ],
      [
        ['run', 'p.csv', '--max-failure-rate', '1.5'],
        {},
        /'--max-failure-rate <p>' argument '1\.5' is invalid\. must be a number from 0 to 1/,
      ],
      [
        ['run', 'p.csv', '--job-deadline', '-1'],
        {},
        /'--job-deadline <s>' argument '-1' is invalid\. must be a number > 0/,
      ],
      [
        ['run', 'p.csv', '--late-for', '1y'],
        {},
        /'--late-for <duration>' argument '1y' is invalid\. must be a duration: seconds, or a number with a unit \(30s, 90m, 24h, 2d\)/,
      ],
      [
        ['run', 'p.csv', '--page-size', '0'],
        {},
        /'--page-size <n>' argument '0' is invalid\. must be a whole number >= 1/,
      ],
      [
        ['review', 'batch-0000000000000000'],
        { VIDBATCH_REVIEW_PORT: '70000' },
        /value '70000' from env 'VIDBATCH_REVIEW_PORT' is invalid\. must be a whole number from 0 to 65535/,
      ],
      // Removed: every batch shares the rate budget, and the flag did nothing for a release.
      [['run', 'p.csv', '--shared-budget'], {}, /unknown option '--shared-budget'/],
      [
        ['retry-failed', 'batch-0000000000000000', '--poll-jitter', '2'],
        {},
        /'--poll-jitter <f>' argument '2' is invalid\. must be a number from 0 to 1/,
      ],
      [
        ['simulator', '--fault-504-after', '1.2'],
        {},
        /'--fault-504-after <p>' argument '1\.2' is invalid\. must be a number from 0 to 1/,
      ],
      [
        ['server', '--port', '70000'],
        {},
        /'--port <n>' argument '70000' is invalid\. must be a whole number from 0 to 65535/,
      ],
      [
        ['download', 'batch-0000000000000000', '--concurrency', '0'],
        {},
        /'--concurrency <n>' argument '0' is invalid/,
      ],
    ];
    for (const [args, env, message] of cases) {
      const r = await vidbatch(args, { cwd: dir, env });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(/Usage: vidbatch/); // a pointer to --help, not the whole help
    }
    expect(existsSync(join(dir, '.vidbatch'))).toBe(false); // no embedded server was started
  });

  it('a batch option set in the environment is not read: one warning line per variable names the flag', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-flags-'));
    await writeFile(join(dir, 'p.csv'), 'prompt\na red kite\n');
    // Values that would be refused (or change the plan) if they were read.
    const r = await vidbatch(['run', 'p.csv', '--dry-run'], {
      cwd: dir,
      env: { VIDBATCH_CONCURRENCY: '0', VIDBATCH_OUT_DIR: 'elsewhere', VIDBATCH_SHARED_BUDGET: '1' },
    });
    expect(r.code, r.stderr).toBe(0);
    const warnings = r.stderr.split('\n').filter((line) => line.startsWith('warning: '));
    expect(warnings).toEqual([
      'warning: VIDBATCH_CONCURRENCY is no longer read; use --concurrency instead',
      'warning: VIDBATCH_OUT_DIR is no longer read; use --out-root instead',
      'warning: VIDBATCH_SHARED_BUDGET is no longer read; every batch shares the rate budget, with no flag',
    ]);
    expect(JSON.parse(r.stdout)).toMatchObject({ rows: 1 });
    // Without any of them: no warning.
    const quiet = await vidbatch(['run', 'p.csv', '--dry-run'], { cwd: dir });
    expect(quiet.code, quiet.stderr).toBe(0);
    expect(quiet.stderr).not.toContain('warning:');
  });
});
