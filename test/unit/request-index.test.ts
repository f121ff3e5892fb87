import { mkdir, mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { createRowActivities } from '../../src/activities/rows';
import type { PageRow } from '../../src/contract/rows';
import { loadCsv } from '../../src/input/csv';
import { assignRequestKeys } from '../../src/input/request-key';
import type { JournalEntry } from '../../src/results/jobs-journal';
import { RequestIndex } from '../../src/results/request-index';
import { promptResult } from '../fixtures/prompt-result';

const A = 'batch-aaaaaaaaaaaaaaaa-0000abcd';
const B = 'batch-bbbbbbbbbbbbbbbb-0000abcd';
const C = 'batch-cccccccccccccccc-0000abcd';
/** A batch of the same file in the same root, for another target (`--simulate`, another account). */
const OTHER_TARGET = 'batch-aaaaaaaaaaaaaaaa-ffff0000';

async function folder(root: string, batchId: string, manifest: object[], journal: JournalEntry[] = []) {
  await mkdir(join(root, batchId), { recursive: true });
  const lines = (xs: object[]) => xs.map((x) => `${JSON.stringify(x)}\n`).join('');
  await writeFile(join(root, batchId, 'manifest.jsonl'), lines(manifest));
  await writeFile(join(root, batchId, 'jobs.jsonl'), lines(journal));
}

const at = '2026-11-25T00:00:00.000Z';

describe('RequestIndex', () => {
  it('finds each request by its exact key, as input/request-key.ts makes them or as a hand edit left them', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vidbatch-index-'));
    const made = '0123456789abcdef01234567';
    const keys = [
      `${made}/1`,
      `${made}/2`,
      `${made}/take two/1`,
      `${made.toUpperCase()}/1`, // not a made key: kept as written, a different request
      `${made}1`,
      'hand-made ✓',
    ];
    await folder(
      root,
      A,
      keys.map((request, i) =>
        promptResult(`r${i}`, { status: 'failed', errorCode: 'cancelled', jobId: `vid_${i}`, request }),
      ),
    );
    const index = await new RequestIndex(root).refresh(C);
    keys.forEach((request, i) =>
      expect(index.lookup(request, B)?.follow?.view).toMatchObject({ rowId: `r${i}`, request }),
    );
    expect(index.lookup(`${made}/3`, B)).toBeUndefined();
    expect(index.lookup(`${made.slice(0, 23)}/1`, B)).toBeUndefined();
  });

  it('offers a kept video, else a job that may still finish, and counts unknown outcomes; never the own batch', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vidbatch-index-'));
    await folder(
      root,
      A,
      [
        promptResult('r1', {
          status: 'succeeded',
          jobId: 'vid_1',
          request: 'h1/1',
          file: '/x/r1.mp4',
          bytes: 9,
        }),
        promptResult('r2', { status: 'failed', errorCode: 'cancelled', jobId: 'vid_2', request: 'h2/1' }),
        promptResult('r3', {
          status: 'failed',
          errorCode: 'generation_failed',
          jobId: 'vid_3',
          request: 'h3/1',
        }),
        promptResult('r6', {
          status: 'failed',
          errorCode: 'content_moderation',
          jobId: 'vid_6',
          request: 'h6/1',
        }),
        promptResult('r7', { status: 'failed', errorCode: 'job_gone', jobId: 'vid_7', request: 'h7/1' }),
      ],
      [
        { rowId: 'r4', jobId: 'vid_4', generation: 0, at, request: 'h4/1' }, // terminated before recording
        { rowId: 'r5', generation: 0, unknown: true, at, request: 'h5/1' },
      ],
    );
    const index = await new RequestIndex(root).refresh(C);
    expect(index.lookup('h1/1', B)?.kept).toMatchObject({
      batchId: A,
      rowId: 'r1',
      view: { kept: { jobId: 'vid_1' } },
    });
    expect(index.lookup('h1/1', A)).toBeUndefined(); // the batch's own rows are its own prior, not the index's
    expect(index.lookup('h2/1', B)?.follow).toMatchObject({
      batchId: A,
      rowId: 'r2',
      view: { jobId: 'vid_2' },
    });
    expect(index.lookup('h3/1', B)).toBeUndefined(); // the gateway failed it: a new job is needed
    expect(index.lookup('h4/1', B)?.follow?.view.jobId).toBe('vid_4');
    expect(index.lookup('h5/1', B)).toEqual({ unknownSubmits: 1 });
    expect(index.lookup('h1/2', B)).toBeUndefined(); // another take
    // Paying again would not change these: refused for its content, its job forgotten.
    expect(index.lookup('h6/1', B)?.settled).toMatchObject({ batchId: A, rowId: 'r6' });
    expect(index.lookup('h7/1', B)?.settled).toMatchObject({ batchId: A, rowId: 'r7' });
  });

  it('reads what folders gained since the last refresh, new folders included; the latest kept video wins', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vidbatch-index-'));
    await folder(root, A, [], [{ rowId: 'r1', jobId: 'vid_1', generation: 0, at, request: 'h1/1' }]);
    const index = await new RequestIndex(root).refresh(C);
    expect(index.lookup('h1/1', C)?.follow?.view.jobId).toBe('vid_1');
    await folder(
      root,
      A,
      [
        promptResult('r1', {
          status: 'succeeded',
          jobId: 'vid_1',
          request: 'h1/1',
          submittedAt: '2026-11-25T01:00:00Z',
        }),
      ],
      [{ rowId: 'r1', jobId: 'vid_1', generation: 0, at, request: 'h1/1' }],
    );
    await folder(root, B, [
      promptResult('x', {
        status: 'succeeded',
        jobId: 'vid_9',
        request: 'h1/1',
        submittedAt: '2026-11-25T02:00:00Z',
      }),
    ]);
    await index.refresh(C);
    expect(index.lookup('h1/1', C)?.kept).toMatchObject({ batchId: B, rowId: 'x' });
  });

  it("never offers another target's jobs: a --simulate try-out's videos are not the real gateway's", async () => {
    const root = await mkdtemp(join(tmpdir(), 'vidbatch-index-'));
    await folder(root, OTHER_TARGET, [
      promptResult('r1', { status: 'succeeded', jobId: 'sim_1', request: 'h1/1' }),
    ]);
    const index = await new RequestIndex(root).refresh(C);
    expect(index.lookup('h1/1', C)).toBeUndefined();
    // Read for a batch of that target, the same index still keeps the two apart.
    await index.refresh('batch-cccccccccccccccc-ffff0000');
    expect(index.lookup('h1/1', 'batch-cccccccccccccccc-ffff0000')?.kept?.batchId).toBe(OTHER_TARGET);
    expect(index.lookup('h1/1', C)).toBeUndefined();
  });
});

/** A succeeded row whose video was downloaded, as a batch records it. */
const kept = (i: number) =>
  promptResult(`r${i}`, {
    status: 'succeeded',
    jobId: `vid_${i}`,
    request: `h${i}/1`,
    url: `https://cdn.example/v/${i}.mp4?sig=${'s'.repeat(200)}`,
    file: `/x/r${i}.mp4`,
    sha256: 'ab'.repeat(32),
    bytes: 1000 + i,
    submittedAt: at,
    verification: { ok: true, problems: [] },
  });

describe('RequestIndex: what it holds', () => {
  it('reads back every kept video from its spill, past the first MiB, and the one a later line leaves', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vidbatch-index-'));
    const rows = Array.from({ length: 5000 }, (_, i) => kept(i)); // about 2 MiB of kept videos
    await folder(root, A, [
      ...rows,
      promptResult('r7', { status: 'failed', errorCode: 'cancelled', jobId: 'vid_7', request: 'h7/1' }),
    ]);
    const spillDir = await mkdtemp(join(tmpdir(), 'vidbatch-spill-'));
    const index = await new RequestIndex(root, { spillDir }).refresh(C);
    for (const i of [0, 1, 2500, 4999])
      expect(index.lookup(`h${i}/1`, C)?.kept?.view).toEqual({
        rowId: `r${i}`,
        request: `h${i}/1`,
        status: 'succeeded',
        jobId: `vid_${i}`,
        jobGeneration: 0,
        unknownSubmits: 0,
        kept: {
          jobId: `vid_${i}`,
          url: `https://cdn.example/v/${i}.mp4?sig=${'s'.repeat(200)}`,
          generation: 0,
          submittedAt: at,
          file: `/x/r${i}.mp4`,
          sha256: 'ab'.repeat(32),
          bytes: 1000 + i,
          verification: { ok: true, problems: [] },
        },
      });
    // Its last line says cancelled: no video kept, its job followed.
    const cancelled = index.lookup('h7/1', C);
    expect(cancelled?.kept).toBeUndefined();
    expect(cancelled?.follow?.rowId).toBe('r7');
    expect(cancelled?.follow?.view.kept).toBeUndefined();
    // The spill file was deleted as soon as it was opened.
    expect(await readdir(spillDir)).toEqual([]);
    index.close();
    expect(index.lookup('h1/1', C)).toBeUndefined();
  });

  it('keeps kept videos itself when it cannot write its spill', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vidbatch-index-'));
    await folder(root, A, [kept(1)]);
    const notAFolder = join(root, 'file');
    await writeFile(notAFolder, '');
    const index = await new RequestIndex(root, { spillDir: join(notAFolder, 'spill') }).refresh(C);
    expect(index.lookup('h1/1', C)?.kept?.view.kept).toMatchObject({ jobId: 'vid_1', bytes: 1001 });
  });
});

describe('readRows: a first read of a big request index', () => {
  it('heartbeats while it reads, and offers what it read', async () => {
    const f = await mkdtemp(join(tmpdir(), 'vidbatch-index-rows-'));
    const csvPath = join(f, 'in.csv');
    await writeFile(csvPath, 'id,prompt\nr0,a fox\n');
    const { rows: parsed, sha256 } = await loadCsv(csvPath);
    assignRequestKeys(parsed);
    const root = join(f, 'out');
    // Another batch of the root kept a video for the same request, among 5,000 rows of other requests.
    const others = Array.from({ length: 5_000 }, (_, i) =>
      promptResult(`x${i}`, { status: 'failed', errorCode: 'job_failed', request: `other${i}/1` }),
    );
    await folder(root, A, [...others, ...[kept(0)].map((r) => ({ ...r, request: parsed[0]!.request }))]);
    const activities = createRowActivities(root);
    const input = { csvPath, csvSha256: sha256, offset: 0, limit: 10, batchId: C, reuse: true };
    const env = new MockActivityEnvironment({ startToCloseTimeoutMs: 30_000 });
    let beats = 0;
    env.on('heartbeat', () => (beats += 1));
    const readPage = (i: typeof input) => activities.readRows(i);
    const page = await env.run<[typeof input], PageRow[], typeof readPage>(readPage, input);
    expect(beats).toBeGreaterThanOrEqual(2);
    expect(page[0]?.prior?.reused).toMatchObject({ jobId: 'vid_0', reusedFrom: { batchId: A, rowId: 'r0' } });
  });
});
