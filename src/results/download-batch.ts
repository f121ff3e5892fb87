// `vidbatch download`: every video of a batch, verified and checked against its row. The manifest is the one
// record of which file each row has: what is fetched here is appended to it; a video kept in the store is
// copied from there.
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { DownloadedVideo, Verification, VerifiedVideo } from '../contract/jobs';
import {
  arrivedLateResult,
  mayArriveLate,
  URL_EXPIRED_CODE,
  VIDEO_MISMATCH_CODE,
  type PromptResult,
} from '../contract/prompt';
import { DownloadError } from '../errors';
import { objectAt } from '../store/open-store';
import { isStoreUrl } from '../store/store-url';
import { downloadVerified, EXPIRED_URL_STATUSES, size, verifyFile, type KeyedAccess } from './download';
import { appendResults, readManifest } from './manifest';
import { askedOf, verifyVideo } from './verify-video';

export interface DownloadReport {
  rowId: string;
  file?: string;
  sha256?: string;
  bytes?: number;
  /** The file was already there (recorded in the manifest, same sha256): nothing was fetched. */
  reused?: boolean;
  /** Not fetched: the download was stopped (`signal`) before this video was (a `.part` file may resume it). */
  interrupted?: boolean;
  /** The recorded URL had expired and the job, asked again, gave this one, which worked. */
  freshUrl?: string;
  error?: string;
  /** The file checked against the row's duration and resolution (verify-video.ts). */
  verification?: Verification;
  /**
   * A row that had ended `deadline_exceeded` or `cancelled` with its job id (DownloadBatchOptions.late): its
   * video `arrived` (fetched and recorded as the row's new state, `arrivedLate`), its job has no video
   * (`none`: unfinished, failed or gone), or a worker checks it (`served`: left to it).
   */
  late?: 'arrived' | 'none' | 'served';
}

export interface DownloadBatchOptions {
  /** Where videos with no file yet go (default: the manifest's folder, where `run` puts them). */
  dir?: string;
  /** Downloads at once (default 4). */
  concurrency?: number;
  /** The largest video accepted, in bytes (default DEFAULT_MAX_VIDEO_BYTES). */
  maxBytes?: number;
  /**
   * Asks the gateway for the job's URL now (a status check; a gateway may sign a fresh one), after the
   * recorded URL answered 403, 404 or 410; resolves undefined when the job gives none. Absent: not asked.
   */
  currentUrl?: (jobId: string) => Promise<string | undefined>;
  /** The key's headers for videos the provider serves itself (under its base URL only); asked per video. */
  auth?: () => KeyedAccess | undefined;
  /** `--verify strict` (the batch's own): a video that differs from its row fails it as `video_mismatch`. */
  strict?: boolean;
  /** Waits between attempts of a retryable failure (tests shorten it). */
  retryDelayMs?: number;
  /** Stops the download (Ctrl-C): no video is started after it, and those on the way stop, their part kept. */
  signal?: AbortSignal;
  /**
   * Also asks the jobs of rows that ended `deadline_exceeded` or `cancelled` (through `currentUrl`, which they
   * need) for a video that arrived late, and keeps it (docs/spend-safety.md#late-videos); `served`: rows whose
   * late checks a worker makes, left to it.
   */
  late?: { served?: ReadonlySet<string> };
}

/** Whether `vidbatch download` fetches a row's video: its job completed (succeeded, or its URL expired). */
export function downloadable(r: PromptResult): boolean {
  if (r.status === 'succeeded') return !!r.url;
  return r.errorCode === URL_EXPIRED_CODE && !!(r.jobId || r.url);
}

/** A recorded file that is still there with its recorded sha256, or undefined. */
async function recordedFile(r: PromptResult): Promise<DownloadedVideo | undefined> {
  if (!r.file || !r.sha256 || (await size(r.file)) === undefined) return undefined;
  const found = await verifyFile(r.file, r.file).catch(() => undefined);
  return found?.sha256 === r.sha256 ? found : undefined;
}

/**
 * A video kept in the store (a batch run with VIDBATCH_STORE): copied into `dir`, checked against its recorded
 * sha256, unless it is there already. Undefined when the store no longer has it.
 */
async function copyFromStore(
  r: PromptResult,
  dir: string,
): Promise<(DownloadedVideo & { reused: boolean }) | undefined> {
  const target = join(dir, `${r.rowId}.mp4`);
  if ((await size(target)) !== undefined) {
    const there = await verifyFile(target, r.file!).catch(() => undefined);
    if (there && there.sha256 === r.sha256) return { ...there, reused: true };
  }
  const { store, key } = await objectAt(r.file!);
  const chunks = await store.stream(key);
  if (!chunks) return undefined;
  await mkdir(dir, { recursive: true });
  const part = `${target}.part`;
  await pipeline(chunks, createWriteStream(part));
  const got = await verifyFile(part, r.file!);
  if (r.sha256 && got.sha256 !== r.sha256) {
    await rm(part, { force: true });
    throw new DownloadError(`${r.file}: sha256 ${got.sha256} differs from the recorded one`, false);
  }
  await rename(part, target);
  return { ...got, file: target, reused: false };
}

/**
 * Fetches one row's video into `dir`, retrying what can be retried; a URL that answers 403, 404 or 410 is
 * replaced once by the job's current URL (`currentUrl`).
 */
async function fetchRow(
  r: PromptResult,
  dir: string,
  options: DownloadBatchOptions,
): Promise<DownloadedVideo & { url: string; fresh: boolean }> {
  let url = r.url;
  let fresh = false;
  // The job is asked at most once per row. A url_expired row's URL is known to fail: its job is asked first.
  let asked = false;
  if ((!url || r.status === 'failed') && r.jobId && options.currentUrl) {
    asked = true;
    const current = await options.currentUrl(r.jobId);
    if (current) [url, fresh] = [current, current !== r.url];
  }
  if (!url) throw new DownloadError(`no URL: job ${r.jobId} gave none when asked again`, false);
  for (let attempt = 1; ; attempt++) {
    try {
      const auth = options.auth?.();
      const got = await downloadVerified(url, dir, `${r.rowId}.mp4`, {
        ...(auth ? { auth } : {}),
        ...(r.sha256 ? { expectedSha256: r.sha256 } : {}),
        ...(options.maxBytes !== undefined ? { maxBytes: options.maxBytes } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      });
      return { file: got.file, sha256: got.sha256, bytes: got.bytes, url, fresh };
    } catch (err) {
      if (!(err instanceof DownloadError) || options.signal?.aborted) throw err;
      const gone = err.httpStatus !== undefined && EXPIRED_URL_STATUSES.includes(err.httpStatus);
      if (gone && !asked && r.jobId && options.currentUrl) {
        asked = true;
        const current = await options.currentUrl(r.jobId);
        if (!current || current === url)
          throw new DownloadError(
            `${err.message}; job ${r.jobId}, asked again, gave ${current ? 'the same URL' : 'no URL'}`,
            false,
            err.httpStatus,
          );
        [url, fresh, attempt] = [current, true, 0];
        continue;
      }
      if (!err.retryable || attempt >= 3) throw err;
      await new Promise((done) => setTimeout(done, (options.retryDelayMs ?? 1000) * attempt));
    }
  }
}

/**
 * Downloads the video of every row whose job completed (a succeeded row with its URL, or one that ended
 * `url_expired`), `concurrency` at a time, verifying each and checking it against its row. The manifest is the
 * one record of which file each row has: a file it names that is still there with its sha256 is kept as it
 * is (nothing is fetched); every video fetched here is appended to the manifest as the row's new last line
 * (with `downloadedAt`) as soon as it is verified, so `status`, `results`, `review` and re-runs see it, and a
 * download stopped part-way (`signal`: Ctrl-C after hours) keeps every video it recorded: the next one
 * fetches only the rest. Returns one report per row.
 */
export async function downloadBatch(
  manifest: string,
  options: DownloadBatchOptions = {},
): Promise<DownloadReport[]> {
  const late = options.late && options.currentUrl ? options.late : undefined;
  const rows = (await readManifest(manifest)).filter((r) => downloadable(r) || (late && mayArriveLate(r)));
  const dir = options.dir ?? dirname(manifest);
  const reports: DownloadReport[] = [];
  // One append at a time: appends of concurrent downloads must not interleave (an append cuts a torn last line).
  let recording: Promise<unknown> = Promise.resolve();
  const record = (result: PromptResult) => {
    const append = recording.then(() => appendResults(dirname(manifest), [result]));
    recording = append.catch(() => undefined);
    return append;
  };
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < rows.length; i = next++) {
      const row = rows[i]!;
      if (options.signal?.aborted) {
        reports.push({ rowId: row.rowId, interrupted: true });
        continue;
      }
      if (!downloadable(row)) {
        reports.push(await fetchLate(row, dir, options, late?.served, record));
        continue;
      }
      // Kept in the store: copied here; the manifest keeps naming the store's copy.
      if (row.file && isStoreUrl(row.file)) {
        const copied = await copyFromStore(row, dir).catch((err: Error) => err);
        if (copied instanceof Error) {
          reports.push({ rowId: row.rowId, error: copied.message });
          continue;
        }
        if (copied) {
          const { reused, ...got } = copied;
          reports.push({ rowId: row.rowId, ...got, reused, verification: row.verification });
          continue;
        }
      }
      const kept = await recordedFile(row);
      if (kept) {
        reports.push({ rowId: row.rowId, ...kept, reused: true, verification: row.verification });
        continue;
      }
      let fetched;
      try {
        fetched = await fetchRow(row, dir, options);
      } catch (err) {
        reports.push(
          options.signal?.aborted
            ? { rowId: row.rowId, interrupted: true }
            : { rowId: row.rowId, error: (err as Error).message },
        );
        continue;
      }
      try {
        const { url, fresh, ...got } = fetched;
        const verification = await verifyVideo(got.file, askedOf(row.parameters));
        await record(fetchedResult(row, { ...got, verification }, url, options.strict === true));
        reports.push({ rowId: row.rowId, ...got, verification, ...(fresh ? { freshUrl: url } : {}) });
      } catch (err) {
        reports.push({ rowId: row.rowId, error: (err as Error).message });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.concurrency ?? 4) }, worker));
  const order = new Map(rows.map((r, i) => [r.rowId, i]));
  return reports.sort((a, b) => order.get(a.rowId)! - order.get(b.rowId)!);
}

/**
 * A row that ended while its job went on: its job asked once for a video (a status check); one that arrived
 * is fetched, verified, and recorded as the row's new state, `arrivedLate`.
 */
async function fetchLate(
  row: PromptResult,
  dir: string,
  options: DownloadBatchOptions,
  served: ReadonlySet<string> | undefined,
  record: (result: PromptResult) => Promise<unknown>,
): Promise<DownloadReport> {
  if (served?.has(row.rowId)) return { rowId: row.rowId, late: 'served' };
  const url = await options.currentUrl!(row.jobId!).catch(() => undefined);
  if (!url) return { rowId: row.rowId, late: 'none' };
  try {
    const { url: from, fresh, ...got } = await fetchRow({ ...row, status: 'succeeded', url }, dir, options);
    const verification = await verifyVideo(got.file, askedOf(row.parameters));
    const kept = fetchedResult(row, { ...got, verification }, from, options.strict === true);
    await record(arrivedLateResult({ ...kept, finishedAt: kept.downloadedAt! }, row));
    return {
      rowId: row.rowId,
      ...got,
      verification,
      late: 'arrived',
      ...(fresh ? { freshUrl: from } : {}),
    };
  } catch (err) {
    if (options.signal?.aborted) return { rowId: row.rowId, interrupted: true };
    return { rowId: row.rowId, error: (err as Error).message };
  }
}

/**
 * The row's new manifest line once its video is on disk: the file, its hash and verification, the URL that
 * served it. A `url_expired` row becomes succeeded (its video was generated and is now kept); a strict batch
 * fails a video that differs from its request, as the run would have.
 */
function fetchedResult(row: PromptResult, got: VerifiedVideo, url: string, strict: boolean): PromptResult {
  const { errorCode, errorMessage, ...rest } = row;
  delete rest.downloadError; // the video is on disk now
  // A url_expired row's video, and a late video, make the row succeeded; any other failure stays.
  const stays = row.status === 'failed' && errorCode !== URL_EXPIRED_CODE && !mayArriveLate(row);
  const base: PromptResult = {
    ...rest,
    ...(stays ? { errorCode, errorMessage } : {}),
    status: stays ? 'failed' : 'succeeded',
    url,
    ...got,
    downloadedAt: new Date().toISOString(),
  };
  if (strict && !got.verification.ok)
    return {
      ...base,
      status: 'failed',
      errorCode: VIDEO_MISMATCH_CODE,
      errorMessage: `the video differs from the request: ${got.verification.problems.join('; ')}`,
    };
  return base;
}
