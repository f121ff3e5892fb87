import { mkdtemp, readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cachedWorkflowBundle } from '../../src/worker/workflow-bundle';
import { WORKFLOWS_PATH } from '../../src/worker';

describe('cachedWorkflowBundle', () => {
  it('builds the bundle once per version of the code, in a child process, and reuses it', async () => {
    const cache = await mkdtemp(join(tmpdir(), 'vidbatch-bundle-'));
    const first = await cachedWorkflowBundle(WORKFLOWS_PATH, cache);
    expect(first.codePath.startsWith(join(cache, 'workflow-bundles'))).toBe(true);
    const code = await readFile(first.codePath, 'utf8');
    expect(code).toContain('batchWorkflow');
    expect(code).toContain('promptWorkflow');
    const builtAt = (await stat(first.codePath)).mtimeMs;
    const second = await cachedWorkflowBundle(WORKFLOWS_PATH, cache);
    expect(second.codePath).toBe(first.codePath);
    expect((await stat(second.codePath)).mtimeMs).toBe(builtAt);
  }, 60_000);
});
