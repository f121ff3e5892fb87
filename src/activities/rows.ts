// The readRows activity: a page of the batch's CSV, read on the worker (the batch's input holds only the path,
// or its URL in the shared store, and sha256) and checked against the sha256 the batch started with. The page
// comes from the CSV's rows file (input/rows-file.ts), read by position, so a worker never holds the whole
// CSV. Each row carries what is known about it (`prior`): from earlier runs of its batch, else from other
// batches of the output root that paid for the same request (results/request-index.ts). A page is cut by size
// as well as by count so that no payload comes near Temporal's limit.
import { createWriteStream } from 'node:fs';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { mkdir, rm, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { VerifyMode } from '../contract/batch-options';
import type { EnhanceOptions } from '../contract/enhance';
import type { Verification } from '../contract/jobs';
import { VIDEO_MISMATCH_CODE, type PromptResult } from '../contract/prompt';
import { csvFileSha256, loadCsv, loadCsvFrom, type CsvProvider, type ParsedCsv } from '../input/csv';
import { RowsFileReader, rowsFileKey, writeRowsFile } from '../input/rows-file';
import { PathNotAllowedError } from '../errors';
import { LocalStore } from '../store/local-store';
import { copyAcross, sizeAt } from '../store/copy-across';
import { isStoreUrl } from '../store/store-url';
import { objectAt } from '../store/open-store';
import type { ObjectStore } from '../store/object-store';
import type { PageRow, PriorOutcome, PromptRow } from '../contract/rows';
import { FolderPrior, mergePrior } from '../results/prior';
import { priorFromIndex, RequestIndex, type RequestSource } from '../results/request-index';
import { tellPayer } from './request-claims';
import { askedOf, verifyVideo } from '../results/verify-video';
import { STAGING_DIR } from './outputs';
import { allowedFile, allowedPath, type PathRoots } from './paths';
import { csvChanged, pathNotAllowed } from './to-failure';

export interface ReadRowsInput {
  csvPath: string;
  csvSha256: string;
  offset: number;
  limit: number;
  /** The batch: with it, rows carry `prior` from its output folder and pages are cut at `maxBytes`. */
  batchId?: string;
  /** The batch's output folder; default `<outRoot>/<batchId>`. */
  outDir?: string;
  /** retry-failed: the original batch's folder, for the jobs it made for the same rows. */
  priorOutDir?: string;
  /** Most bytes of rows JSON per page (at least one row is returned). */
  maxBytes?: number;
  /** Consult the output root's request index (the root holding the batch's folder): see results/request-index. */
  reuse?: boolean;
  /** The batch downloads its videos (a reused video is linked, or copied, where its own would go). */
  download?: boolean;
  /** The batch's download folder; default its output folder. */
  downloadDir?: string;
  /** The batch rewrites its prompts: rows to be rewritten are keyed with its settings (input/request-key.ts). */
  enhance?: EnhanceOptions;
  /**
   * The batch's `--verify`: with `strict` (and downloads), a video reused from another batch is verified here
   * against the row, whatever that batch's mode was; one that cannot be checked here is followed instead.
   */
  verify?: VerifyMode;
}

/** A prior outcome worth sending: the row finished, has a job, or had a submit of unknown outcome. */
function meaningful(prior: PriorOutcome | undefined): prior is PriorOutcome {
  return (
    !!prior &&
    (!!prior.status || !!prior.jobId || !!prior.unknownSubmits || prior.generation > 0 || !!prior.reused)
  );
}

/**
 * A reused video as a `--verify strict` batch records it: with this batch's own verification of the file, and
 * ended `video_mismatch` (job, URL and file kept) when it differs from the request, as the batch's own video
 * would be. Another batch may have kept it with `--verify flag`, mismatch and all.
 */
export function verifiedReuse(result: PromptResult, verification: Verification): PromptResult {
  if (result.status !== 'succeeded') return result;
  if (verification.ok) return { ...result, verification };
  const from = result.reusedFrom;
  return {
    ...result,
    verification,
    status: 'failed',
    errorCode: VIDEO_MISMATCH_CODE,
    errorMessage:
      `the video differs from the request: ${verification.problems.join('; ')}` +
      (from ? ` (kept by ${from.batchId} row ${from.rowId}; nothing was paid for it here)` : ''),
  };
}

/** Cuts `rows` after the last one that keeps the page's JSON within `maxBytes` (at least one row). */
export function cutBySize<T>(rows: T[], maxBytes: number): T[] {
  let bytes = 2; // []
  for (let i = 0; i < rows.length; i++) {
    bytes += Buffer.byteLength(JSON.stringify(rows[i])) + 1;
    if (bytes > maxBytes && i > 0) return rows.slice(0, i);
  }
  return rows;
}

/** `make(key)`, kept for the next call with the same key; at most `size` keys, the oldest dropped first. */
function cached<T>(size: number, make: (key: string) => T): (key: string) => T {
  const entries = new Map<string, T>();
  return (key) => {
    let value = entries.get(key);
    if (value === undefined) {
      if (entries.size >= size) entries.delete(entries.keys().next().value!);
      entries.set(key, (value = make(key)));
    }
    return value;
  };
}

/** The Temporal client of the activity this code runs in, if it runs in one that has one. */
function activityClient(): Client | undefined {
  try {
    return Context.current().client;
  } catch {
    return undefined;
  }
}

/** The activity this code runs in, if it runs in one (a test or `plan` calls readRows directly). */
function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/**
 * `roots`: where CSVs may be read and output folders consulted (activities/paths.ts); undefined: anywhere.
 * `store`: the shared object store (VIDBATCH_STORE), where batches started with it keep their CSV and rows.
 * `provider`: the one this worker sends to, whose defaults a row that names none gets (as `run` read it).
 */
export function createRowActivities(
  outRoot = 'out',
  roots?: PathRoots,
  store?: ObjectStore,
  provider?: CsvProvider,
) {
  // The CSVs whose sha256 was checked, by size and mtime: a file whose size or mtime moved is hashed again, so
  // an edit is noticed on the next page. And a reader per rows file, which knows where its pages start.
  const checked = cached(16, () => ({ stamp: '' }));
  const localStore = cached(16, (root) => new LocalStore(root));
  const reader = cached(16, (key) => {
    const [root, rowsKey, sha] = key.split('\n');
    return new RowsFileReader(root ? localStore(root) : store!, rowsKey!, sha!);
  });

  /** The CSV the batch started from, checked: a path on this machine, or the key of one in the store. */
  async function csvOf(csvPath: string, csvSha256: string): Promise<{ path: string; key?: string }> {
    if (!isStoreUrl(csvPath)) {
      const path = await allowedPath(csvPath, 'input', roots);
      await checkCsv(path, csvSha256);
      return { path };
    }
    const key = store?.keyOf(csvPath);
    if (key === undefined)
      throw pathNotAllowed(new PathNotAllowedError(csvPath, store ? [store.url] : [], 'VIDBATCH_STORE'));
    // Its key is its content's sha256, written once: only its absence is worth a look.
    if (!(await store!.head(key)))
      throw csvChanged(
        `${csvPath} is missing from the store (the batch started from it): put it back and resume, or cancel the batch`,
      );
    return { path: csvPath, key };
  }

  /** Throws CsvChanged unless `csvPath` is the file the batch started from. */
  async function checkCsv(csvPath: string, csvSha256: string) {
    const file = await stat(csvPath).catch(() => undefined);
    if (!file)
      throw csvChanged(
        `${csvPath} is missing (the batch started from it): restore it and resume, or cancel the batch`,
      );
    const seen = checked(csvPath);
    const stamp = `${file.size}/${file.mtimeMs}/${csvSha256}`;
    if (seen.stamp === stamp) return;
    const now = await csvFileSha256(csvPath);
    if (now !== csvSha256)
      throw csvChanged(
        `${csvPath} changed since the batch started: restore it and resume, or cancel the batch (sha256 now ${now.slice(0, 12)}, expected ${csvSha256.slice(0, 12)})`,
      );
    seen.stamp = stamp;
  }

  /**
   * Rows `offset` on, from the rows file: in the store with the CSV, else under the output root `root`. Written
   * from the CSV here when it is missing.
   */
  async function rowsOf(input: ReadRowsInput, csv: { path: string; key?: string }, root: string) {
    const key = rowsFileKey(input.csvSha256, input.enhance, provider);
    const rows = reader(`${csv.key === undefined ? root : ''}\n${key}\n${input.csvSha256}`);
    const page = await rows.page(input.offset, input.limit);
    if (page) return page;
    let parsed: ParsedCsv | undefined;
    if (csv.key === undefined) parsed = await loadCsv(csv.path, { provider });
    else {
      const chunks = await store!.stream(csv.key);
      if (chunks) parsed = await loadCsvFrom(chunks, csv.path, { provider });
    }
    if (parsed?.sha256 !== input.csvSha256)
      throw csvChanged(
        `${csv.path} changed since the batch started: restore it and resume, or cancel the batch`,
      );
    await writeRowsFile(rows.store, key, parsed.sha256, parsed.rows, input.enhance);
    const written = await rows.page(input.offset, input.limit);
    if (!written) throw new Error(`${rows.store.urlOf(key)} could not be read back after writing it`);
    return written;
  }
  // Output folders read so far (a few batches at a time per worker), and the output roots' request indexes,
  // each read incrementally.
  const folder = cached(16, (dir) => new FolderPrior(dir));
  // A batch's own folder, held only for the rows ahead of its cursor (FolderPrior.refresh): kept apart from
  // the folders read whole (a retry's original batch), which must keep every row.
  const ownFolder = cached(16, (dir) => new FolderPrior(dir));
  // Job ids and kept videos of an index spill to the worker's staging folder (results/request-index.ts); a
  // dropped index's spill file goes once nothing uses it any more.
  const indexOf = cached(4, (root) => new RequestIndex(root, { spillDir: resolve(outRoot, STAGING_DIR) }));

  /**
   * The output root's request index, brought up to date for `batchId`. A first read of a big root takes a while
   * (docs/benchmarks.md: about 20 s for ten earlier batches of 100,000 rows): it heartbeats as it goes, and
   * readRows has a heartbeat timeout beside a start-to-close long enough for it (contract/failures.ts
   * READ_ROWS_TIMEOUTS), so a crashed worker's read is taken over soon and a long one is not cut.
   */
  async function currentIndex(root: string, batchId: string): Promise<RequestIndex> {
    const ctx = activityContext();
    return indexOf(root).refresh(batchId, ctx && (() => ctx.heartbeat()));
  }

  /**
   * The earlier batch's video, hard-linked (else copied) where this batch's own would go: its download folder,
   * its output folder, or beside its results in the store. Undefined when it has none reachable here.
   */
  async function linkVideo(
    source: RequestSource,
    rowId: string,
    downloadDir: string | undefined,
    ownDir: string,
  ) {
    const kept = source.view.kept!;
    if (!kept.file) return undefined;
    try {
      // Videos go to a download root, or beside the manifest in an out root (the default).
      const from = await allowedPath(kept.file, 'download', roots).catch(() =>
        allowedPath(kept.file!, 'out', roots),
      );
      const to = downloadDir
        ? await allowedFile(
            await allowedPath(downloadDir, 'download', roots),
            `${rowId}.mp4`,
            'download',
            roots,
          )
        : await allowedFile(ownDir, `${rowId}.mp4`, 'out', roots);
      if ((await sizeAt(to)) !== kept.bytes) {
        const metadata = kept.sha256 ? { sha256: kept.sha256 } : undefined;
        if (!(await copyAcross(from, to, { contentType: 'video/mp4', ...(metadata ? { metadata } : {}) })))
          return undefined;
      }
      return { path: to, sha256: kept.sha256, bytes: kept.bytes };
    } catch {
      return undefined; // the earlier file is gone or not reachable here: the row keeps the URL and job
    }
  }

  /**
   * A reused video verified against `row` on this worker (a copy in the store is fetched into the staging
   * folder for it, then deleted). Undefined when it cannot be read here.
   */
  async function verifyReused(path: string, row: PromptRow, batchId: string) {
    const asked = askedOf(row.parameters);
    try {
      if (!isStoreUrl(path)) return await verifyVideo(path, asked);
      const { store, key } = await objectAt(path);
      const chunks = await store.stream(key);
      if (!chunks) return undefined;
      const local = await allowedFile(
        resolve(outRoot, STAGING_DIR, batchId),
        `${row.id}.reused.mp4`,
        'out',
        roots,
      );
      await mkdir(dirname(local), { recursive: true });
      try {
        await pipeline(chunks, createWriteStream(local));
        return await verifyVideo(local, asked);
      } finally {
        await rm(local, { force: true });
      }
    } catch {
      return undefined;
    }
  }

  return {
    async readRows(input: ReadRowsInput): Promise<PageRow[]> {
      const csv = await csvOf(input.csvPath, input.csvSha256);
      if (!input.batchId) return rowsOf(input, csv, await allowedPath(outRoot, 'out', roots));
      const ownDir = await allowedPath(input.outDir ?? resolve(outRoot, input.batchId), 'out', roots);
      const rows = await rowsOf(input, csv, dirname(ownDir));
      const own = await ownFolder(ownDir).refresh(rows[0]?.line);
      const original = input.priorOutDir
        ? await folder(await allowedPath(input.priorOutDir, 'out', roots)).refresh()
        : undefined;
      // The batch's output root, a folder or the store, holds the other batches the index reads.
      const index = input.reuse ? await currentIndex(dirname(ownDir), input.batchId) : undefined;
      const page: PageRow[] = [];
      for (const row of rows) {
        let prior = mergePrior(own.get(row.id), original?.get(row.id, false));
        // What this batch knows comes first; the index only speaks for rows this batch never touched.
        if (!meaningful(prior) && index && row.request) {
          let reuse = index.lookup(row.request, input.batchId);
          if (reuse) {
            const file =
              reuse.kept && input.download
                ? await linkVideo(reuse.kept, row.id, input.downloadDir, ownDir)
                : undefined;
            // `--verify strict` is this batch's promise, not the other batch's: the video is checked here.
            const strict = reuse.kept && input.download && input.verify === 'strict';
            const verification =
              strict && file ? await verifyReused(file.path, row, input.batchId) : undefined;
            // No file to check here: its job is followed, so the video is fetched and checked as this batch's.
            if (strict && !verification) reuse = { follow: reuse.kept, unknownSubmits: reuse.unknownSubmits };
            prior = priorFromIndex(row, reuse, file);
            // The row that paid for a job this row follows never stops it under this one.
            const client = activityClient();
            if (client && prior.followedFrom && prior.jobId)
              await tellPayer(client, prior.followedFrom, {
                jobId: prior.jobId,
                batchId: input.batchId,
                rowId: row.id,
              });
            if (verification && prior.reused)
              prior = { ...prior, reused: verifiedReuse(prior.reused, verification) };
          }
        }
        page.push(meaningful(prior) ? { ...row, prior } : row);
      }
      return input.maxBytes ? cutBySize(page, input.maxBytes) : page;
    },
  };
}
