// Bad settings are refused before anything is sent (issue 17 §6): the real `vidbatch`, spawned with values
// out of range on the command line and in the environment, exits 2 naming the flag (or variable), the value
// and the range, before it opens a server, a worker or the CSV.
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
        /'--concurrency <n>' argument '0' is invalid\. must be a whole number from 1 to 10000/,
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
        ['run', 'p.csv', '--page-size', '0'],
        {},
        /'--page-size <n>' argument '0' is invalid\. must be a whole number >= 1/,
      ],
      [
        ['run', 'p.csv'],
        { VIDBATCH_CONCURRENCY: '0' },
        /value '0' from env 'VIDBATCH_CONCURRENCY' is invalid\. must be a whole number from 1 to 10000/,
      ],
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
});
