// docs/cli.md is what scripts/cli-docs.ts makes of the program now: a flag added, renamed or hidden without
// regenerating it fails here.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { CLI_DOCS, renderCliDocs } from '../../scripts/cli-docs';

describe('docs/cli.md', () => {
  it('is up to date with the program', async () => {
    const [written, fresh] = await Promise.all([readFile(CLI_DOCS, 'utf8').catch(() => ''), renderCliDocs()]);
    if (written !== fresh)
      expect.fail('docs/cli.md differs from the help of the program: run npm run docs:cli (and commit it)');
  });

  it('lists every command, and the hidden options of run with their descriptions', async () => {
    const docs = await renderCliDocs();
    for (const command of ['run', 'retry-failed', 'simulator', 'worker', 'server', 'doctor'])
      expect(docs).toContain(`## vidbatch ${command}\n`);
    const run = docs.slice(docs.indexOf('## vidbatch run\n'), docs.indexOf('## vidbatch status\n'));
    expect(run).toContain('### Hidden options');
    expect(run).toContain('- `--poll-cap <s>`: up to this interval');
    expect(run).toContain('- `--out <dir>`: old name of --out-root');
  });
});
