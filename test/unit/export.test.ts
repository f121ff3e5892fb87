// The failed-row exports leave out rows that, sent again unchanged, would be paid again by accident: refused
// for their content, or whose job the gateway no longer knows. They are named, never dropped silently.
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseCsv } from '../../src/input/csv';
import { exportResults, failedRowsCsv, leftOutLines } from '../../src/results/export';
import { promptResult } from '../fixtures/prompt-result';

async function manifestOf(dir: string): Promise<string> {
  const rows = [
    promptResult('ok', { line: 2, prompt: 'a calm lake', input: { prompt: 'a calm lake' } }),
    ...(
      [
        ['late', 'deadline_exceeded'],
        ['bad1', 'content_moderation'],
        ['gone', 'job_gone'],
        ['bad2', 'content_moderation'],
      ] as const
    ).map(([rowId, errorCode], i) =>
      promptResult(rowId, {
        line: 3 + i,
        prompt: `prompt ${rowId}`,
        input: { prompt: `prompt ${rowId}` },
        status: 'failed',
        errorCode,
        jobId: `vid_${rowId}`,
      }),
    ),
  ];
  const manifest = join(dir, 'manifest.jsonl');
  await writeFile(manifest, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return manifest;
}

const ids = async (path: string) => parseCsv(await readFile(path, 'utf8'), path).rows.map((r) => r.id);

describe('failed-row exports', () => {
  it('failed.csv leaves out refused and gone rows, writes them to left-out.csv and says why', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-export-'));
    const exported = await exportResults(await manifestOf(dir), dir, 'csv');
    expect(exported.failed).toBe(4);
    expect(await ids(join(dir, 'failed.csv'))).toEqual(['late']);
    expect(await ids(join(dir, 'left-out.csv'))).toEqual(['bad1', 'gone', 'bad2']);
    expect(await readFile(join(dir, 'failed-errors.csv'), 'utf8')).toContain('job_gone');
    expect(exported.leftOut.map((l) => [l.code, l.rows])).toEqual([
      ['content_moderation', 2],
      ['job_gone', 1],
    ]);
    expect(exported.leftOut[0]!.why).toContain('refused their content');
    expect(exported.leftOut[1]!.why).toContain('no longer knows their job');
    expect(leftOutLines(exported.leftOut, 'batch-x', 'left out of failed.csv')[0]).toBe(
      '2 row(s) left out of failed.csv: the gateway refused their content; sent unchanged it would refuse it ' +
        'again (content_moderation); `vidbatch retry-failed batch-x --code content_moderation` sends them as ' +
        'they are, deliberately',
    );
  });

  it('retry-failed without --code leaves them out and says so; with their code it takes them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-export-'));
    const manifest = await manifestOf(dir);
    const all = await failedRowsCsv(manifest, dir, 'batch-x');
    expect(await ids(all.path)).toEqual(['late']);
    expect(all.leftOut.map((l) => [l.code, l.rows])).toEqual([
      ['content_moderation', 2],
      ['job_gone', 1],
    ]);
    const refused = await failedRowsCsv(manifest, dir, 'batch-x', 'content_moderation');
    expect(await ids(refused.path)).toEqual(['bad1', 'bad2']);
    expect(refused.leftOut).toEqual([]);
    expect(await ids((await failedRowsCsv(manifest, dir, 'batch-x', 'job_gone')).path)).toEqual(['gone']);
  });
});
