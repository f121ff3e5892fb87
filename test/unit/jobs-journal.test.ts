import { appendFile, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { appendJournal, journalPath, readJournal } from '../../src/results/jobs-journal';

const at = '2030-01-01T00:00:00.000Z';

describe('jobs journal', () => {
  it('appends entries as JSON lines under <outDir>/jobs.jsonl and reads them back in order', async () => {
    const dir = join(await mkdtemp(join(tmpdir(), 'vidbatch-journal-')), 'batch-x');
    expect(await readJournal(dir)).toEqual([]);
    await appendJournal(dir, { rowId: 'r1', jobId: 'vid_1', generation: 0, at });
    await appendJournal(dir, { rowId: 'r2', unknown: true, generation: 0, at });
    expect(journalPath(dir)).toBe(join(dir, 'jobs.jsonl'));
    expect(await readJournal(dir)).toEqual([
      { rowId: 'r1', jobId: 'vid_1', generation: 0, at },
      { rowId: 'r2', unknown: true, generation: 0, at },
    ]);
  });

  it('keeps every entry of concurrent appends, each on its own line', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-journal-'));
    await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        appendJournal(dir, { rowId: `r${i}`, jobId: `vid_${i}`, generation: 0, at }),
      ),
    );
    const entries = await readJournal(dir);
    expect(new Set(entries.map((e) => e.jobId)).size).toBe(200);
    expect((await readFile(journalPath(dir), 'utf8')).split('\n').filter(Boolean)).toHaveLength(200);
  });

  it('skips a torn last line and starts the next entry on a fresh line', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-journal-'));
    await appendJournal(dir, { rowId: 'r1', jobId: 'vid_1', generation: 0, at });
    await appendFile(journalPath(dir), '{"rowId":"r2","jobId":"vid_'); // crash mid-write
    expect((await readJournal(dir)).map((e) => e.rowId)).toEqual(['r1']);
    await appendJournal(dir, { rowId: 'r3', jobId: 'vid_3', generation: 1, at });
    expect((await readJournal(dir)).map((e) => e.rowId)).toEqual(['r1', 'r3']);
  });
});
