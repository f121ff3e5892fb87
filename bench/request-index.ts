// The request index of an output root holding N earlier batches of M rows each (results/request-index.ts): the
// root is written once (manifest.jsonl and jobs.jsonl as batches write them: long VBench prompts, request keys
// from input/request-key.ts, most rows succeeded with a verified download, some failed, cancelled or of unknown
// outcome), then a fresh process reads it as a new batch's readRows would: the first refresh (cold), a second
// one (nothing new), and lookups. Prints one JSON line: times and the reading process's peak RSS.
//   npx tsx bench/request-index.ts --batches 10 --rows 100000 [--store] [--root DIR] [--fresh]
// --store: the root is a bucket on a local versitygw (bash scripts/s3.sh build), each finished batch's logs
// compacted as a worker leaves them. --root: where the root is written (kept, and reused by the next run with
// the same figures unless --fresh); default a folder under the system's temporary folder.
import { spawnSync } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { PromptResult } from '../src/contract/prompt';
import type { PromptRow } from '../src/contract/rows';
import { assignRequestKeys } from '../src/input/request-key';
import type { JournalEntry } from '../src/results/jobs-journal';
import { RequestIndex } from '../src/results/request-index';
import { ObjectLog } from '../src/store/object-log';
import type { ObjectStore } from '../src/store/object-store';
import { vbenchPrompts } from './vbench';

const SCOPE = '0000abcd';
const batchId = (i: number) => `batch-${i.toString(16).padStart(16, '0')}-${SCOPE}`;
/** The batch that asks: a new one in the same root and scope. */
const ASKER = `batch-${'f'.repeat(16)}-${SCOPE}`;
const LOOKUPS = 10_000;

const { values: o } = parseArgs({
  options: {
    batches: { type: 'string', default: '10' },
    rows: { type: 'string', default: '100000' },
    store: { type: 'boolean', default: false },
    root: { type: 'string' },
    fresh: { type: 'boolean', default: false },
    read: { type: 'string' }, // internal: the reading process, given the root
    keys: { type: 'string' }, // internal: the keys it looks up (a JSON file)
  },
});
const batches = Number(o.batches);
const rowsPerBatch = Number(o.rows);

/** Batch `b`'s rows: VBench prompts with a per-batch seed, so each batch's requests are its own. */
function rowsOf(b: number, prompts: string[]): PromptRow[] {
  const rows: PromptRow[] = [];
  for (let i = 0; i < rowsPerBatch; i++) {
    const prompt = prompts[(b * 7919 + i) % prompts.length]!;
    rows.push({
      id: `vb-${i + 1}`,
      line: i + 2,
      prompt,
      model: 'modelfamily-1.0-r2v',
      input: { prompt },
      parameters: { resolution: '720P', duration: 5, seed: b },
    });
  }
  assignRequestKeys(rows);
  return rows;
}

const hex = (n: number, len: number) => n.toString(16).padStart(len, '0').slice(-len);

/** What a batch recorded for row `i`: mostly a verified download; some failed, cancelled, unknown, refused. */
function recordsOf(b: number, i: number, row: PromptRow, dir: string) {
  const submittedAt = new Date(Date.UTC(2026, 10, 1 + b) + i * 1000).toISOString();
  const finishedAt = new Date(Date.parse(submittedAt) + 90_000).toISOString();
  const jobId = `vid_${hex(b, 4)}${hex(i * 2654435761, 8)}${hex(i, 8)}`;
  const fields = {
    rowId: row.id,
    line: row.line,
    prompt: row.prompt,
    model: row.model,
    input: row.input,
    parameters: row.parameters,
    request: row.request,
  };
  const kind = i % 100;
  const entry: JournalEntry = {
    rowId: row.id,
    jobId,
    generation: 0,
    request: row.request,
    line: row.line,
    at: submittedAt,
    model: row.model,
    resolution: '720P',
    duration: 5,
  };
  const base = { ...fields, attempts: 1, polls: 2, submittedAt, finishedAt, generation: 0 };
  const requestId = `req_${hex(i * 40503, 8)}${hex(b, 4)}`;
  if (kind < 92)
    return {
      journal: [entry],
      result: {
        ...base,
        status: 'succeeded',
        jobId,
        url: `https://cdn.gateway.example/v1/videos/${jobId}/content.mp4?expires=1795000000&sig=${hex(i * 977, 8)}${hex(b, 8)}`,
        file: `${dir}/${row.id}.mp4`,
        sha256: `${hex(i * 31, 8)}${hex(b, 8)}`.repeat(4),
        bytes: 1_800_000 + (i % 5000),
        verification: {
          ok: true,
          durationSeconds: 5.04,
          width: 1280,
          height: 720,
          codec: 'h264',
          audio: false,
          problems: [],
        },
        requestId,
      } satisfies PromptResult,
    };
  if (kind < 95)
    return {
      journal: [entry],
      result: {
        ...base,
        status: 'failed',
        jobId,
        errorCode: 'deadline_exceeded',
        errorMessage: `job ${jobId} did not finish within the job deadline (30 min)`,
        requestId,
      } satisfies PromptResult,
    };
  if (kind < 97)
    return {
      journal: [entry],
      result: {
        ...base,
        status: 'failed',
        jobId,
        errorCode: 'generation_failed',
        errorMessage: 'the model could not generate this video',
        requestId,
      } satisfies PromptResult,
    };
  if (kind < 98)
    return {
      journal: [entry],
      result: {
        ...base,
        status: 'failed',
        jobId,
        errorCode: 'content_moderation',
        errorMessage: 'the prompt was refused by the content filter',
        requestId,
      } satisfies PromptResult,
    };
  if (kind < 99)
    // A submit of unknown outcome, then the batch gave up on the row.
    return {
      journal: [{ ...entry, jobId: undefined, unknown: true as const }],
      result: {
        ...base,
        status: 'failed',
        errorCode: 'submit_unknown',
        errorMessage: 'the submit timed out after sending',
        unknownSubmits: 1,
      } satisfies PromptResult,
    };
  // A job made, then the batch was terminated before recording the row.
  return { journal: [entry], result: undefined };
}

/** Writes `lines` as JSON lines to a local file, a chunk at a time. */
async function writeLines(path: string, lines: Iterable<string>) {
  const out = createWriteStream(path);
  let chunk: string[] = [];
  const flush = async () => {
    if (!out.write(chunk.join(''))) await new Promise<void>((r) => out.once('drain', () => r()));
    chunk = [];
  };
  for (const line of lines) {
    chunk.push(line);
    if (chunk.length >= 1000) await flush();
  }
  await flush();
  await new Promise<void>((resolve, reject) =>
    out.end((err?: Error | null) => (err ? reject(err) : resolve())),
  );
}

/** Writes records to an object log in parts of 1,000 (old enough to compact), then compacts it. */
async function writeLog<T>(store: ObjectStore, prefix: string, records: T[], t0: number) {
  const log = new ObjectLog<T>(store, prefix);
  const writing: Promise<unknown>[] = [];
  for (let i = 0; i < records.length; i += 1000) {
    writing.push(log.append(records.slice(i, i + 1000), t0 + i));
    if (writing.length >= 8) await Promise.all(writing.splice(0));
  }
  await Promise.all(writing);
  await log.compact(Date.now(), 1);
}

async function prepare(store: ObjectStore | undefined, root: string) {
  const prompts = await vbenchPrompts('all_dimension_longer');
  let bytes = 0;
  const keys: string[] = [];
  for (let b = 0; b < batches; b++) {
    const id = batchId(b);
    const dir = store ? store.urlOf(id) : join(root, id);
    const rows = rowsOf(b, prompts);
    const manifest: string[] = [];
    const journal: string[] = [];
    const results: PromptResult[] = [];
    const entries: JournalEntry[] = [];
    rows.forEach((row, i) => {
      const { result, journal: js } = recordsOf(b, i, row, dir);
      for (const e of js) {
        const clean = JSON.parse(JSON.stringify(e)) as JournalEntry;
        if (store) entries.push(clean);
        else journal.push(`${JSON.stringify(clean)}\n`);
      }
      if (result) {
        if (store) results.push(result);
        else manifest.push(`${JSON.stringify(result)}\n`);
      }
    });
    if (store) {
      const t0 = Date.UTC(2026, 10, 1 + b);
      await writeLog(store, `${id}/manifest.jsonl/`, results, t0);
      await writeLog(store, `${id}/jobs.jsonl/`, entries, t0);
      bytes += results.reduce((n, r) => n + JSON.stringify(r).length + 1, 0);
      bytes += entries.reduce((n, e) => n + JSON.stringify(e).length + 1, 0);
    } else {
      await mkdir(dir, { recursive: true });
      await writeLines(join(dir, 'manifest.jsonl'), manifest);
      await writeLines(join(dir, 'jobs.jsonl'), journal);
      bytes += manifest.reduce((n, l) => n + Buffer.byteLength(l), 0);
      bytes += journal.reduce((n, l) => n + Buffer.byteLength(l), 0);
    }
    const every = Math.max(1, Math.floor((rowsPerBatch * batches) / (LOOKUPS * 0.9)));
    for (let i = b; i < rows.length; i += every) keys.push(rows[i]!.request!);
    process.stderr.write(`request-index bench: wrote ${id} (${b + 1}/${batches})\n`);
  }
  // And keys no batch has.
  for (let k = keys.length; k < LOOKUPS; k++) keys.push(`${hex(k, 24)}/1`);
  return { bytes, keys };
}

/** The reading process: a worker that never read the root, as after a restart. */
async function read(root: string, keysFile: string) {
  // Keys to look up: rows of every batch (kept videos, jobs to follow, refusals, unknown outcomes), and keys
  // no batch has.
  const keys = JSON.parse(await readFile(keysFile, 'utf8')) as string[];
  const rssBefore = process.memoryUsage().rss;
  const index = new RequestIndex(root);
  let peakRss = 0;
  const sample = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 100);
  let t = performance.now();
  await index.refresh(ASKER);
  const coldMs = performance.now() - t;
  peakRss = Math.max(peakRss, process.memoryUsage().rss);
  t = performance.now();
  await index.refresh(ASKER);
  const warmMs = performance.now() - t;
  t = performance.now();
  const found = { kept: 0, follow: 0, settled: 0, unknown: 0, none: 0 };
  for (const key of keys) {
    const r = index.lookup(key, ASKER);
    if (!r) found.none += 1;
    else if (r.kept) found.kept += 1;
    else if (r.follow) found.follow += 1;
    else if (r.settled) found.settled += 1;
    else found.unknown += 1;
  }
  const lookupUs = ((performance.now() - t) * 1000) / keys.length;
  clearInterval(sample);
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const m = process.memoryUsage();
  return {
    coldMs: Math.round(coldMs),
    warmMs: Math.round(warmMs),
    lookups: keys.length,
    lookupUs: Number(lookupUs.toFixed(1)),
    found,
    startRssMB: Math.round(rssBefore / 2 ** 20),
    peakRssMB: Math.round(Math.max(peakRss, process.resourceUsage().maxRSS * 1024) / 2 ** 20),
    heldRssMB: Math.round(m.rss / 2 ** 20),
    ...(gc ? { heldHeapMB: Math.round(m.heapUsed / 2 ** 20) } : {}),
    heldBuffersMB: Math.round(m.arrayBuffers / 2 ** 20),
  };
}

if (o.read) {
  console.log(JSON.stringify(await read(o.read, o.keys!)));
  process.exit(0);
}

let s3: Awaited<ReturnType<typeof import('../test/s3-server').startS3Server>> | undefined;
let store: ObjectStore | undefined;
let root: string;
let keysFile: string;
let work: string | undefined;
const env: Record<string, string> = {};
const started = performance.now();
let written: number | undefined;
if (o.store) {
  const { findVersitygw, startS3Server } = await import('../test/s3-server');
  const { S3Store } = await import('../src/store/s3-store');
  const versitygw = findVersitygw();
  if (!versitygw) throw new Error('no versitygw: run `bash scripts/s3.sh build` first');
  // The server's folder goes in one of ours (its temporary folder is the system's), removed at the end.
  work = await mkdtemp(join(tmpdir(), 'vidbatch-request-index-store-'));
  const systemTmp = process.env.TMPDIR;
  process.env.TMPDIR = work;
  s3 = await startS3Server(versitygw, 'vidbatch-bench').finally(() => {
    if (systemTmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = systemTmp;
  });
  Object.assign(env, s3.env);
  Object.assign(process.env, s3.env);
  root = `s3://${s3.bucket}/root`;
  store = new S3Store(root);
  env.VIDBATCH_STORE = root;
  keysFile = join(work, 'keys.json');
  try {
    const { bytes, keys } = await prepare(store, root);
    written = bytes;
    await writeFile(keysFile, JSON.stringify(keys));
  } catch (err) {
    await s3.stop();
    await rm(work, { recursive: true, force: true });
    throw err;
  }
} else {
  root = o.root ?? join(tmpdir(), `vidbatch-request-index-${batches}x${rowsPerBatch}`);
  const marker = join(root, '.bench.json');
  keysFile = join(root, '.bench-keys.json');
  const want = JSON.stringify({ batches, rows: rowsPerBatch, version: 1 });
  if (o.fresh || !existsSync(marker) || (await readFile(marker, 'utf8')) !== want) {
    await rm(root, { recursive: true, force: true });
    await mkdir(root, { recursive: true });
    const { bytes, keys } = await prepare(undefined, root);
    written = bytes;
    await writeFile(keysFile, JSON.stringify(keys));
    await writeFile(marker, want);
  }
}
const prepareS = Math.round((performance.now() - started) / 1000);
const child = spawnSync(
  process.execPath,
  [
    ...process.execArgv,
    fileURLToPath(import.meta.url),
    ...['--batches', String(batches), '--rows', String(rowsPerBatch), '--read', root, '--keys', keysFile],
  ],
  { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env }, maxBuffer: 1 << 20 },
);
const figures = child.stdout.toString().trim();
console.log(
  JSON.stringify({
    batches,
    rows: rowsPerBatch,
    where: o.store ? 'store (versitygw)' : 'disk',
    ...(written !== undefined ? { writtenMB: Math.round(written / 2 ** 20), prepareS } : { reused: root }),
    ...(figures ? (JSON.parse(figures.split('\n').pop()!) as object) : { failed: child.status }),
  }),
);
if (s3) {
  (store as { destroy?: () => void }).destroy?.();
  await s3.stop();
}
if (work) await rm(work, { recursive: true, force: true });
process.exit(child.status ?? 1);
