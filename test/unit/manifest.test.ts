import { appendFile, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { appendResults, manifestPath, readManifest } from '../../src/results/manifest';
import type { PromptResult } from '../../src/contract/prompt';

const result = (rowId: string, status: PromptResult['status'] = 'succeeded'): PromptResult => ({
  rowId,
  line: Number(rowId) + 1,
  prompt: `prompt ${rowId}, with "quotes"`,
  model: 'modelfamily-1.0-r2v',
  input: { prompt: `prompt ${rowId}, with "quotes"` },
  parameters: { resolution: '720P', duration: 5 },
  status,
  jobId: `vid_${rowId}`,
  url: status === 'succeeded' ? `http://x/${rowId}.mp4` : undefined,
  attempts: 1,
  polls: 2,
  finishedAt: new Date(0).toISOString(),
});

describe('manifest', () => {
  it('appends each row once, even when the same group is appended again (activity retry)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-manifest-'));
    expect(await appendResults(dir, [result('1'), result('2')])).toBe(2);
    expect(await appendResults(dir, [result('2'), result('3', 'failed')])).toBe(1);
    expect(await appendResults(dir, [result('1'), result('2'), result('3')])).toBe(0);
    const lines = (await readFile(manifestPath(dir), 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(3);
    expect((await readManifest(manifestPath(dir))).map((r) => [r.rowId, r.status])).toEqual([
      ['1', 'succeeded'],
      ['2', 'succeeded'],
      ['3', 'failed'],
    ]);
  });

  it('cuts a torn last line left by a crash before appending again', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-manifest-'));
    await appendResults(dir, [result('1')]);
    await appendFile(manifestPath(dir), JSON.stringify(result('2')).slice(0, 30)); // crash mid-write
    expect((await readManifest(manifestPath(dir))).map((r) => r.rowId)).toEqual(['1']);
    expect(await appendResults(dir, [result('2')])).toBe(1);
    const text = await readFile(manifestPath(dir), 'utf8');
    expect(
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as PromptResult).rowId),
    ).toEqual(['1', '2']);
  });

  it('notices rows appended by another writer', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-manifest-'));
    await appendResults(dir, [result('1')]);
    await appendFile(manifestPath(dir), JSON.stringify(result('2')) + '\n');
    expect(await appendResults(dir, [result('2'), result('3')])).toBe(1);
    expect(await readManifest(manifestPath(dir))).toHaveLength(3);
  });

  it("keeps a row's LAST line as its final state, and appends a later outcome of the same row", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-manifest-'));
    const cancelled = {
      ...result('1', 'failed'),
      errorCode: 'cancelled',
      finishedAt: '2030-01-01T00:00:00.000Z',
    };
    const later = { ...result('1'), finishedAt: '2030-01-01T01:00:00.000Z' };
    expect(await appendResults(dir, [cancelled, result('2')])).toBe(2);
    expect(await appendResults(dir, [later])).toBe(1);
    // the same outcome again (a retried recordResults) is not written twice
    expect(await appendResults(dir, [later, cancelled])).toBe(0);
    expect((await readFile(manifestPath(dir), 'utf8')).trim().split('\n')).toHaveLength(3);
    const final = await readManifest(manifestPath(dir));
    expect(final.map((r) => [r.rowId, r.status, r.finishedAt])).toEqual([
      ['1', 'succeeded', later.finishedAt],
      ['2', 'succeeded', result('2').finishedAt],
    ]);
  });

  it('writes each record of a group once when the group repeats a record', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-manifest-'));
    expect(await appendResults(dir, [result('1'), result('1')])).toBe(1);
  });
});
