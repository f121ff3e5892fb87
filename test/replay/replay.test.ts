// Replays recorded histories of real batches through the current workflow code: a change that would break
// running workflows (non-determinism) fails here. Regenerate with `npm run record-histories` only when a
// breaking change is intended and versioned with patched(); keep the older folders.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { workflowBundle } from '../integration/helpers';

const DIR = fileURLToPath(new URL('../fixtures/histories/', import.meta.url));

describe('replay of recorded histories', () => {
  it('replays every recorded batch and prompt history without non-determinism', async () => {
    // One folder per recorded workflow version; every version must still replay.
    const files = (await readdir(DIR, { recursive: true })).filter((f) => f.endsWith('.json')).sort();
    const versions = new Set(files.map((f) => f.split('/')[0]));
    expect(versions.size).toBeGreaterThanOrEqual(2);
    for (const v of versions) {
      expect(files.some((f) => f.startsWith(`${v}/batchWorkflow`))).toBe(true);
      expect(files.some((f) => f.startsWith(`${v}/promptWorkflow`))).toBe(true);
    }
    const histories = await Promise.all(
      files.map(async (f) => ({
        workflowId: f,
        history: historyFromJSON(JSON.parse(await readFile(join(DIR, f), 'utf8'))),
      })),
    );
    const results = [];
    for await (const result of Worker.runReplayHistories(
      { workflowBundle: await workflowBundle() },
      histories,
    )) {
      results.push({ id: result.workflowId, error: result.error ? String(result.error) : undefined });
    }
    expect(results).toHaveLength(files.length);
    expect(results.filter((r) => r.error)).toEqual([]);
  });
});
