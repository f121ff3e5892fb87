// Verified downloads of finished videos: HTTP status, content type, size, MP4 signature, sha256. A partial
// file resumes with a Range request only for the URL it came from (sidecar `<name>.part.json`); an existing
// file is reused only when its sha256 matches the recorded one (or the one just downloaded), and never
// overwritten: a different video for the same name is kept next to it. Used for one video (the downloadVideo
// activity) and for every video of a batch (`vidbatch download`).
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { request } from 'undici';
import { DownloadError } from '../errors';
import type { DownloadedVideo, Verification } from '../contract/jobs';
import { readManifest } from './manifest';
import { askedOf, verifyVideo } from './verify-video';

async function size(path: string): Promise<number | undefined> {
  return stat(path).then(
    (s) => s.size,
    () => undefined,
  );
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(path), hash);
  return hash.digest('hex');
}

/** True when the bytes start like an MP4 (ISO BMFF): a first box whose type is `ftyp`. */
export function looksLikeMp4(bytes: Uint8Array): boolean {
  return bytes.length >= 12 && Buffer.from(bytes.subarray(4, 8)).toString('latin1') === 'ftyp';
}

/** Checks a file on disk: non-empty and starting with an MP4 `ftyp` box. */
async function verifyFile(path: string, url: string): Promise<DownloadedVideo> {
  const bytes = (await size(path)) ?? 0;
  if (bytes < 12)
    throw new DownloadError(`${url}: downloaded file is empty or truncated (${bytes} bytes)`, false);
  const handle = await open(path, 'r');
  const head = Buffer.alloc(12);
  await handle.read(head, 0, 12, 0);
  await handle.close();
  if (!looksLikeMp4(head)) {
    throw new DownloadError(`${url}: not an MP4 file (no ftyp box at the start)`, false);
  }
  return { file: path, sha256: await sha256Of(path), bytes };
}

export interface DownloadOptions {
  /** When the manifest already knows the file's hash: an existing file must match it. */
  expectedSha256?: string;
  timeoutMs?: number;
  /** Aborts the download (a stopping worker cancels it after its grace); the `.part` file is kept to resume. */
  signal?: AbortSignal;
}

/** The URL a `.part` file was downloaded from (its sidecar), if known. */
async function partUrl(part: string): Promise<string | undefined> {
  try {
    return (JSON.parse(await readFile(`${part}.json`, 'utf8')) as { url?: string }).url;
  } catch {
    return undefined;
  }
}

/** `<dir>/<base>.<sha8>.mp4`: where a second, different video for the same name goes. */
function alternateName(target: string, sha256: string): string {
  return target.replace(/(\.mp4)?$/, (ext) => `.${sha256.slice(0, 12)}${ext}`);
}

export async function downloadVerified(
  url: string,
  dir: string,
  name: string,
  options: DownloadOptions = {},
): Promise<DownloadedVideo & { reused: boolean }> {
  await mkdir(dir, { recursive: true });
  const target = join(dir, name);
  const existing =
    (await size(target)) !== undefined ? await verifyFile(target, url).catch(() => undefined) : undefined;
  if (existing && options.expectedSha256) {
    if (existing.sha256 === options.expectedSha256) return { ...existing, reused: true };
    throw new DownloadError(`${target} exists with another sha256 than recorded; not overwriting it`, false);
  }
  // Without a recorded hash an existing file proves nothing (another batch's, an older job's): download,
  // then reuse it only if it is the same video.
  const part = `${target}.part`;
  if ((await size(part)) !== undefined && (await partUrl(part)) !== url) await rm(part, { force: true });
  await writeFile(`${part}.json`, JSON.stringify({ url }));
  const have = (await size(part)) ?? 0;
  const response = await request(url, {
    headers: have > 0 ? { range: `bytes=${have}-` } : {},
    signal: AbortSignal.any([
      AbortSignal.timeout(options.timeoutMs ?? 5 * 60_000),
      ...(options.signal ? [options.signal] : []),
    ]),
  }).catch((err: Error) => {
    throw new DownloadError(
      `${url}: ${err.name === 'TimeoutError' ? 'timed out' : `connection failed (${err.message})`}`,
      true,
    );
  });
  const { statusCode, headers } = response;
  if (statusCode !== 200 && statusCode !== 206) {
    await response.body.dump();
    // 404/410/403: the link is gone or expired; retrying the same URL cannot help.
    throw new DownloadError(
      `${url}: HTTP ${statusCode}${statusCode === 410 ? ' (link expired)' : ''}`,
      statusCode >= 500 || statusCode === 429,
    );
  }
  const type = String(headers['content-type'] ?? '');
  if (type && !/^(video\/|application\/octet-stream|binary\/octet-stream)/.test(type)) {
    await response.body.dump();
    throw new DownloadError(`${url}: unexpected content type ${type}`, false);
  }
  const resuming = statusCode === 206 && have > 0;
  await pipeline(response.body, createWriteStream(part, { flags: resuming ? 'a' : 'w' }));
  const expected = Number(headers['content-length'] ?? NaN);
  const got = (await size(part)) ?? 0;
  if (Number.isFinite(expected) && got !== (resuming ? have : 0) + expected) {
    throw new DownloadError(`${url}: got ${got} bytes, expected ${(resuming ? have : 0) + expected}`, true);
  }
  const verified = await verifyFile(part, url);
  if (options.expectedSha256 && verified.sha256 !== options.expectedSha256) {
    throw new DownloadError(`${url}: sha256 ${verified.sha256} differs from the recorded one`, false);
  }
  if (existing?.sha256 === verified.sha256) {
    await rm(part, { force: true });
    await rm(`${part}.json`, { force: true });
    return { ...existing, reused: true };
  }
  // A file that is not this video (or not a valid MP4) keeps its name; this one goes next to it.
  const file = (await size(target)) === undefined ? target : alternateName(target, verified.sha256);
  await rename(part, file);
  await rm(`${part}.json`, { force: true });
  return { ...verified, file, reused: false };
}

export interface DownloadReport {
  rowId: string;
  file?: string;
  sha256?: string;
  bytes?: number;
  reused?: boolean;
  error?: string;
  /** The file checked against the row's duration and resolution (verify-video.ts). */
  verification?: Verification;
}

/**
 * Downloads every succeeded row's video into `dir` (`<rowId>.mp4`), `concurrency` at a time, verifying each and
 * skipping files already verified, and checks each against its row (`verification`); writes `downloads.jsonl`
 * there and returns one report per row.
 */
export async function downloadBatch(
  manifest: string,
  dir: string,
  concurrency = 4,
): Promise<DownloadReport[]> {
  const rows = (await readManifest(manifest)).filter((r) => r.status === 'succeeded' && r.url);
  const reports: DownloadReport[] = [];
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < rows.length; i = next++) {
      const row = rows[i]!;
      let report: DownloadReport = { rowId: row.rowId, error: 'not attempted' };
      for (let attempt = 1; attempt <= 3; attempt++) {
        try {
          const got = await downloadVerified(row.url!, dir, `${row.rowId}.mp4`, {
            expectedSha256: row.sha256,
          });
          const verification = await verifyVideo(got.file, askedOf(row.parameters));
          report = { rowId: row.rowId, ...got, verification };
          break;
        } catch (err) {
          report = { rowId: row.rowId, error: (err as Error).message };
          if (!(err as { retryable?: boolean }).retryable) break;
          await new Promise((r) => setTimeout(r, 1000 * attempt));
        }
      }
      reports.push(report);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'downloads.jsonl'), reports.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return reports;
}
