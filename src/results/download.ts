// Verified downloads of finished videos: HTTP status, content type, size, MP4 signature, sha256. A partial
// file resumes with a Range request only for the URL it came from (sidecar `<name>.part.json`); an existing
// file is reused only when its sha256 matches the recorded one (or the one just downloaded), and never
// overwritten: a different video for the same name is kept next to it. Used for one video (the downloadVideo
// activity) and for every video of a batch (`vidbatch download`), which records what it fetched in the
// manifest, the one record of which file each row has.
// Redirects (object stores answer 302 to a CDN) are followed by a small loop rather than undici's redirect
// interceptor, so each hop's scheme is checked before anything is sent and the error names the URL, and so a
// provider that serves its videos itself gets its key on the hops under its base URL and on no other: not on
// a CDN it redirects to, nor on any hop after one.
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { request, type Dispatcher } from 'undici';
import { DownloadError } from '../errors';
import { DEFAULT_MAX_VIDEO_BYTES } from '../contract/batch-options';
import type { DownloadedVideo } from '../contract/jobs';

export async function size(path: string): Promise<number | undefined> {
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
export async function verifyFile(path: string, url: string): Promise<DownloadedVideo> {
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

export { DEFAULT_MAX_VIDEO_BYTES };

/**
 * Answers of a video URL that mean this URL will not serve the video again: 403 (what object stores answer
 * to an expired signed URL), 404 and 410. A fresh status check of the job may give a working URL.
 */
export const EXPIRED_URL_STATUSES: readonly number[] = [403, 404, 410];

/** Redirects followed per download; one more is an error (a loop, or a chain no CDN needs). */
export const MAX_REDIRECTS = 5;

export interface DownloadOptions {
  /** When the manifest already knows the file's hash: an existing file must match it. */
  expectedSha256?: string;
  timeoutMs?: number;
  /** Aborts the download (a stopping worker cancels it after its grace); the `.part` file is kept to resume. */
  signal?: AbortSignal;
  /** The largest file accepted, in bytes (default DEFAULT_MAX_VIDEO_BYTES); a larger one fails, not retried. */
  maxBytes?: number;
  /** The key's headers for a video the provider serves itself, and the base URL they are limited to. */
  auth?: KeyedAccess;
}

/** Headers that carry a key, and the base URL (origin and path) they may be sent under. */
export interface KeyedAccess {
  base: string;
  headers: Record<string, string>;
}

/** Whether `url` is under `base`: the same origin, and a path at or below the base's. */
export function underBase(url: URL, base: string): boolean {
  if (!URL.canParse(base)) return false;
  const b = new URL(base);
  const root = b.pathname.replace(/\/+$/, '');
  return url.origin === b.origin && (url.pathname === root || url.pathname.startsWith(`${root}/`));
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

const headerOf = (headers: Dispatcher.ResponseData['headers'], name: string): string | undefined => {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/** "2 GiB" for whole GiB, else the byte count. */
const limitText = (bytes: number) =>
  bytes % 1024 ** 3 === 0 ? `${bytes / 1024 ** 3} GiB` : `${bytes} bytes`;

function tooLarge(url: string, maxBytes: number, what: string): DownloadError {
  return new DownloadError(`${url}: ${what}, over the download limit of ${limitText(maxBytes)}`, false);
}

/** Only http and https are fetched: a URL or redirect elsewhere (file:, ftp:, data:) is refused, not retried. */
function httpUrl(target: string, base: URL | undefined, url: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(target, base);
  } catch {
    throw new DownloadError(
      `${url}: ${base ? `redirected to an invalid URL (${target})` : 'not a valid URL'}`,
      false,
    );
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new DownloadError(
      `${url}: ${base ? `redirected to ${parsed.href}, ` : ''}scheme ${parsed.protocol} is not http or https`,
      false,
    );
  return parsed;
}

/**
 * GET `url`, following at most MAX_REDIRECTS redirects (a relative Location resolves against the URL that
 * sent it). Every hop carries the same headers: a resumed download keeps its Range on the CDN it lands on.
 * The key (`auth`) goes only with hops under its base URL, and with none once a hop left it: a redirect back
 * could be the CDN's own doing.
 */
async function get(
  url: string,
  headers: Record<string, string>,
  signal: AbortSignal,
  auth: KeyedAccess | undefined,
): Promise<Dispatcher.ResponseData> {
  let current = httpUrl(url, undefined, url);
  let keyed = auth !== undefined;
  for (let redirects = 0; ; redirects++) {
    keyed &&= underBase(current, auth!.base);
    const sent = keyed ? { ...headers, ...auth!.headers } : headers;
    const response = await request(current, { headers: sent, signal }).catch((err: Error) => {
      const where = redirects ? ` (redirected to ${current.href})` : '';
      throw new DownloadError(
        `${url}${where}: ${err.name === 'TimeoutError' ? 'timed out' : `connection failed (${err.message})`}`,
        true,
      );
    });
    if (!REDIRECT_STATUSES.has(response.statusCode)) return response;
    await response.body.dump();
    const location = headerOf(response.headers, 'location');
    if (!location)
      throw new DownloadError(`${url}: HTTP ${response.statusCode} redirect without a Location`, false);
    if (redirects === MAX_REDIRECTS)
      throw new DownloadError(`${url}: more than ${MAX_REDIRECTS} redirects (last to ${location})`, false);
    current = httpUrl(location, current, url);
  }
}

/** `bytes <start>-<end>/<total or *>` (RFC 9110 §14.4), or undefined when absent or unreadable. */
export function parseContentRange(
  value: string | undefined,
): { start: number; end: number; total?: number } | undefined {
  const m = /^bytes\s+(\d+)-(\d+)\/(\d+|\*)$/i.exec(value?.trim() ?? '');
  if (!m) return undefined;
  const [start, end] = [Number(m[1]), Number(m[2])];
  const total = m[3] === '*' ? undefined : Number(m[3]);
  if (end < start || (total !== undefined && end >= total)) return undefined;
  return { start, end, ...(total !== undefined ? { total } : {}) };
}

/** Passes the body through, failing once the file (`from` bytes already on disk) would exceed `maxBytes`. */
function capBytes(from: number, maxBytes: number, url: string): Transform {
  let seen = from;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      // Chunked bodies announce no size: stop reading as soon as the cap is passed.
      if (seen > maxBytes)
        done(tooLarge(url, maxBytes, `body passed ${limitText(maxBytes)} while streaming`));
      else done(null, chunk);
    },
  });
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
  await fetchToPart(url, part, options);
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

/** Downloads `url` into `part`, resuming it when the server sends exactly the missing bytes. */
async function fetchToPart(url: string, part: string, options: DownloadOptions): Promise<void> {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_VIDEO_BYTES;
  const signal = AbortSignal.any([
    AbortSignal.timeout(options.timeoutMs ?? 5 * 60_000),
    ...(options.signal ? [options.signal] : []),
  ]);
  const discard = async () => {
    await rm(part, { force: true });
    await rm(`${part}.json`, { force: true });
  };
  let have = (await size(part)) ?? 0;
  for (;;) {
    const response = await get(url, have > 0 ? { range: `bytes=${have}-` } : {}, signal, options.auth);
    const { statusCode, headers } = response;
    if (statusCode !== 200 && statusCode !== 206) {
      await response.body.dump();
      // 404/410/403: the link is gone or expired; retrying the same URL cannot help.
      const expired = EXPIRED_URL_STATUSES.includes(statusCode);
      throw new DownloadError(
        `${url}: HTTP ${statusCode}${expired ? ' (link expired or gone)' : ''}`,
        statusCode >= 500 || statusCode === 429,
        statusCode,
      );
    }
    const type = String(headers['content-type'] ?? '');
    if (type && !/^(video\/|application\/octet-stream|binary\/octet-stream)/.test(type)) {
      await response.body.dump();
      throw new DownloadError(`${url}: unexpected content type ${type}`, false);
    }
    // A 200 is the whole file whatever was asked (a server that ignores Range): written from 0. A 206 is
    // appended only when it starts where the part ends; any other part would corrupt the file.
    let from = 0;
    let total: number | undefined;
    if (statusCode === 206) {
      const raw = headerOf(headers, 'content-range');
      const range = parseContentRange(raw);
      if (!range || range.start !== have) {
        await response.body.dump();
        if (have === 0)
          throw new DownloadError(
            `${url}: HTTP 206 (${raw ?? 'no Content-Range'}) to a request for the whole file`,
            true,
          );
        await rm(part, { force: true });
        have = 0; // the part is discarded and the file downloaded from 0 (at most once: have is 0 now)
        continue;
      }
      from = have;
      total = range.total;
    }
    const length = Number(headerOf(headers, 'content-length') ?? NaN);
    const announced = total ?? (Number.isFinite(length) ? from + length : undefined);
    if (announced !== undefined && announced > maxBytes) {
      response.body.destroy(); // not read: the size alone decides
      await discard();
      throw tooLarge(url, maxBytes, `${announced} bytes announced`);
    }
    try {
      await pipeline(
        response.body,
        capBytes(from, maxBytes, url),
        createWriteStream(part, { flags: from > 0 ? 'a' : 'w' }),
      );
    } catch (err) {
      if (err instanceof DownloadError) {
        await discard();
        throw err;
      }
      // A cancel (a stopping worker) stays what it is; a dropped connection or a timeout is worth retrying.
      if (options.signal?.aborted) throw err;
      const e = err as Error;
      throw new DownloadError(
        `${url}: ${e.name === 'TimeoutError' ? 'timed out' : `download interrupted (${e.message})`}`,
        true,
      );
    }
    // Short of either size: retried, and the next attempt resumes from what arrived.
    const got = (await size(part)) ?? 0;
    for (const expected of [Number.isFinite(length) ? from + length : undefined, total])
      if (expected !== undefined && got !== expected)
        throw new DownloadError(`${url}: got ${got} bytes, expected ${expected}`, true);
    return;
  }
}
