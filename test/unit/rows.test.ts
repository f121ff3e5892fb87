import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createRowActivities, cutBySize } from '../../src/activities/rows';
import type { PromptResult } from '../../src/contract/prompt';
import { loadCsv } from '../../src/input/csv';
import { appendJournal } from '../../src/results/jobs-journal';
import { appendResults } from '../../src/results/manifest';
import { FolderPrior } from '../../src/results/prior';
import { verifyVideo } from '../../src/results/verify-video';
import { clip } from '../../src/simulator/test-clips';
import { promptResult } from '../fixtures/prompt-result';

const at = '2030-01-01T00:00:00.000Z';

function result(rowId: string, rest: Partial<PromptResult>): PromptResult {
  return promptResult(rowId, { status: 'failed', polls: 0, finishedAt: at, ...rest });
}

async function csv(rows: number, promptBytes = 10) {
  const dir = await mkdtemp(join(tmpdir(), 'vidbatch-rows-'));
  const path = join(dir, 'in.csv');
  const lines = [
    'id,prompt',
    ...Array.from({ length: rows }, (_, i) => `r${i},${'x'.repeat(promptBytes)}${i}`),
  ];
  await writeFile(path, lines.join('\n') + '\n');
  return { dir, path, sha256: (await loadCsv(path)).sha256 };
}

describe('readRows', () => {
  it('returns plain rows for batches started before the spend-safety patch (no batchId)', async () => {
    const f = await csv(3);
    const activities = createRowActivities(join(f.dir, 'out'));
    const rows = await activities.readRows({ csvPath: f.path, csvSha256: f.sha256, offset: 1, limit: 5 });
    expect(rows.map((r) => r.id)).toEqual(['r1', 'r2']);
    expect(rows.every((r) => !('prior' in r))).toBe(true);
  });

  it("attaches each row's prior outcome: manifest final state, journal jobs, and the original batch's jobs", async () => {
    const f = await csv(6);
    const out = join(f.dir, 'out', 'batch-own');
    const original = join(f.dir, 'out', 'batch-orig');
    await appendResults(out, [
      result('r0', { status: 'succeeded', jobId: 'vid_0', url: 'http://x/0.mp4' }),
      result('r1', { errorCode: 'cancelled', jobId: 'vid_1' }),
      result('r2', { errorCode: 'cancelled' }),
    ]);
    // a later line for r1 wins: it succeeded after all
    await appendResults(out, [
      result('r1', {
        status: 'succeeded',
        jobId: 'vid_1',
        url: 'http://x/1.mp4',
        finishedAt: '2030-01-02T00:00:00.000Z',
      }),
    ]);
    await appendJournal(out, { rowId: 'r2', unknown: true, generation: 0, at });
    await appendJournal(out, { rowId: 'r3', jobId: 'vid_3a', generation: 0, at });
    await appendJournal(out, { rowId: 'r3', jobId: 'vid_3b', generation: 1, at });
    // Written again by a retry that found the job in its heartbeat: still one POST.
    await appendJournal(out, { rowId: 'r3', jobId: 'vid_3b', generation: 1, at });
    await appendResults(original, [
      result('r4', { status: 'succeeded', jobId: 'vid_4', url: 'http://x/4.mp4' }),
    ]);
    const activities = createRowActivities(join(f.dir, 'out'));
    const rows = await activities.readRows({
      csvPath: f.path,
      csvSha256: f.sha256,
      offset: 0,
      limit: 10,
      batchId: 'batch-own',
      priorOutDir: original,
    });
    const prior = Object.fromEntries(rows.map((r) => [r.id, r.prior]));
    expect(prior).toEqual({
      r0: { status: 'succeeded', jobId: 'vid_0', url: 'http://x/0.mp4', generation: 0, jobGeneration: 0 },
      r1: { status: 'succeeded', jobId: 'vid_1', url: 'http://x/1.mp4', generation: 0, jobGeneration: 0 },
      r2: { status: 'failed', errorCode: 'cancelled', generation: 0, unknownSubmits: 1, posts: 1 },
      r3: { jobId: 'vid_3b', generation: 1, jobGeneration: 1, posts: 2 },
      // another batch's final state is not this batch's: only its job is known
      r4: { jobId: 'vid_4', generation: 0, jobGeneration: 0 },
      r5: undefined,
    });
  });

  it('sees what the folder gained since the last page', async () => {
    const f = await csv(2);
    const out = join(f.dir, 'out', 'b');
    const prior = new FolderPrior(out);
    expect((await prior.refresh()).get('r0')).toBeUndefined();
    await appendJournal(out, { rowId: 'r0', jobId: 'vid_0', generation: 0, at });
    expect((await prior.refresh()).get('r0')).toEqual({
      jobId: 'vid_0',
      generation: 0,
      jobGeneration: 0,
      posts: 1,
    });
    await appendResults(out, [result('r0', { status: 'succeeded', jobId: 'vid_0', url: 'u' })]);
    expect((await prior.refresh()).get('r0')).toMatchObject({ status: 'succeeded', url: 'u' });
    // Read from the start (the manifest before the journal), the job is still one POST.
    expect((await new FolderPrior(out).refresh()).get('r0')).toMatchObject({ jobId: 'vid_0', posts: 1 });
  });

  it('lets go of the rows a batch has read past, and reads its folder again when a new run starts over', async () => {
    const f = await csv(6);
    const out = join(f.dir, 'out', 'b');
    const prior = new FolderPrior(out);
    // r0 is on line 2, r4 on line 6; the journal entry without a line (an older journal) is always kept.
    await appendResults(out, [
      result('r0', { line: 2, jobId: 'vid_0' }),
      result('r4', { line: 6, jobId: 'vid_4' }),
    ]);
    await appendJournal(out, { rowId: 'r1', jobId: 'vid_1', generation: 0, at });
    expect((await prior.refresh(2)).get('r0')).toMatchObject({ jobId: 'vid_0' });
    const passed = await prior.refresh(5);
    expect(passed.get('r0')).toBeUndefined();
    expect(passed.get('r1')).toMatchObject({ jobId: 'vid_1' });
    expect(passed.get('r4')).toMatchObject({ jobId: 'vid_4' });
    // What is recorded later for a row passed is not held either; for a row ahead it is.
    await appendJournal(out, { rowId: 'r0', jobId: 'vid_0b', generation: 1, line: 2, at });
    await appendJournal(out, { rowId: 'r5', jobId: 'vid_5', generation: 0, line: 7, at });
    const later = await prior.refresh(5);
    expect(later.get('r0')).toBeUndefined();
    expect(later.get('r5')).toMatchObject({ jobId: 'vid_5' });
    // A new run reads from the top again: every row's prior is there, the latest job winning.
    expect((await prior.refresh(2)).get('r0')).toMatchObject({ jobId: 'vid_0b', jobGeneration: 1, posts: 1 });
  });

  it('gives a re-run every prior after a first run read every page in the same worker', async () => {
    const f = await csv(250);
    const activities = createRowActivities(join(f.dir, 'out'));
    const input = { csvPath: f.path, csvSha256: f.sha256, limit: 100, batchId: 'batch-own' };
    for (let offset = 0; offset < 250; offset += 100) await activities.readRows({ ...input, offset });
    // The first run recorded every row after reading its page.
    const rows = (await loadCsv(f.path)).rows;
    await appendResults(
      join(f.dir, 'out', 'batch-own'),
      rows.map((r) => result(r.id, { line: r.line, status: 'succeeded', jobId: `vid_${r.id}`, url: 'u' })),
    );
    const again = await activities.readRows({ ...input, offset: 0 });
    expect(again.map((r) => r.prior?.status)).toEqual(Array(100).fill('succeeded'));
  });

  it('cuts a page by size as well as by count, keeping at least one row', async () => {
    const f = await csv(40, 19_000); // ~38 KB of JSON per row (prompt and input.prompt)
    const activities = createRowActivities(join(f.dir, 'out'));
    const base = { csvPath: f.path, csvSha256: f.sha256, limit: 100, batchId: 'b' };
    const page = await activities.readRows({ ...base, offset: 0, maxBytes: 512 * 1024 });
    expect(page.length).toBeGreaterThan(1);
    expect(page.length).toBeLessThan(40);
    expect(Buffer.byteLength(JSON.stringify(page))).toBeLessThanOrEqual(512 * 1024);
    expect(cutBySize([{ big: 'x'.repeat(1000) }], 10)).toHaveLength(1);
    expect(cutBySize([1, 2, 3], 1000)).toHaveLength(3);
  });

  it('refuses a CSV edited or removed since the batch started, even after pages were served', async () => {
    const f = await csv(3);
    const activities = createRowActivities(join(f.dir, 'out'));
    const input = { csvPath: f.path, csvSha256: f.sha256, offset: 0, limit: 1, batchId: 'b' };
    await activities.readRows(input);
    await writeFile(f.path, 'id,prompt\nr0,edited\n');
    const err = (await activities.readRows({ ...input, offset: 1 }).catch((e: unknown) => e)) as Error & {
      type?: string;
    };
    expect(err.type).toBe('CsvChanged');
    expect(err.message).toContain(`${f.path} changed since the batch started`);
  });
});

describe("readRows reusing another batch's videos", () => {
  // Batch ids of one target and root (contract/target.ts): the index reads only the asker's scope.
  const FLAG = 'batch-aaaaaaaaaaaaaaaa-0000000a';
  const STRICT = 'batch-bbbbbbbbbbbbbbbb-0000000a';

  /**
   * A root where a `--verify flag` batch kept three videos for the requests of `in.csv`: one as asked, one of
   * another resolution (flagged, still succeeded) and one with no file (run with --no-download).
   */
  async function rootWithFlaggedVideos() {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-reuse-'));
    const path = join(dir, 'in.csv');
    await writeFile(
      path,
      'id,prompt,resolution,duration\nok,a calm lake,720P,5\nlow,a city,720P,5\nbare,a fox,720P,5\n',
    );
    const parsed = await loadCsv(path);
    const root = join(dir, 'out');
    const flagDir = join(root, FLAG);
    await mkdir(flagDir, { recursive: true });
    const kept: PromptResult[] = [];
    for (const row of parsed.rows) {
      const fields = { line: row.line, parameters: row.parameters, request: row.request! };
      const jobId = `vid_${row.id}`;
      if (row.id === 'bare') {
        kept.push(result(row.id, { ...fields, status: 'succeeded', jobId, url: `http://x/${row.id}.mp4` }));
        continue;
      }
      const file = join(flagDir, `${row.id}.mp4`);
      const bytes = clip(row.id === 'low' ? '480P' : '720P', 5);
      await writeFile(file, bytes);
      kept.push(
        result(row.id, {
          ...fields,
          status: 'succeeded',
          jobId,
          url: `http://x/${row.id}.mp4`,
          file,
          bytes: bytes.length,
          verification: await verifyVideo(file, { resolution: '720P', duration: 5 }),
        }),
      );
    }
    await appendResults(flagDir, kept);
    return { root, csv: { csvPath: path, csvSha256: parsed.sha256, offset: 0, limit: 10 } };
  }

  it('--verify strict checks a reused video itself: a mismatch ends video_mismatch, no file is followed', async () => {
    const { root, csv } = await rootWithFlaggedVideos();
    const rows = await createRowActivities(root).readRows({
      ...csv,
      batchId: STRICT,
      reuse: true,
      download: true,
      verify: 'strict',
    });
    const prior = Object.fromEntries(rows.map((r) => [r.id, r.prior]));
    expect(prior.ok?.reused).toMatchObject({
      status: 'succeeded',
      jobId: 'vid_ok',
      file: join(root, STRICT, 'ok.mp4'),
      verification: { ok: true, height: 720 },
      reusedFrom: { batchId: FLAG, rowId: 'ok' },
    });
    // The flag batch kept it as succeeded; this batch's promise is strict: failed, nothing paid, file kept.
    expect(prior.low?.reused).toMatchObject({
      status: 'failed',
      errorCode: 'video_mismatch',
      jobId: 'vid_low',
      file: join(root, STRICT, 'low.mp4'),
      verification: { ok: false, problems: ['height 480, asked 720P'] },
      reusedFrom: { batchId: FLAG, rowId: 'low' },
    });
    expect(prior.low?.reused?.errorMessage).toBe(
      `the video differs from the request: height 480, asked 720P (kept by ${FLAG} row low; nothing was paid for it here)`,
    );
    // Nothing to check here: its job is followed, so this batch fetches the video and verifies it itself.
    expect(prior.bare).toEqual({
      generation: 0,
      jobId: 'vid_bare',
      jobGeneration: 0,
      followedFrom: { batchId: FLAG, rowId: 'bare' },
    });
  });

  it('--verify flag records a reused video as the other batch kept it, mismatch flagged', async () => {
    const { root, csv } = await rootWithFlaggedVideos();
    const rows = await createRowActivities(root).readRows({
      ...csv,
      batchId: STRICT,
      reuse: true,
      download: true,
    });
    const prior = Object.fromEntries(rows.map((r) => [r.id, r.prior]));
    expect(prior.low?.reused).toMatchObject({
      status: 'succeeded',
      verification: { ok: false, problems: ['height 480, asked 720P'] },
    });
    expect(prior.bare?.reused).toMatchObject({ status: 'succeeded', url: 'http://x/bare.mp4' });
  });
});
