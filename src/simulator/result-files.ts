// The result videos: the URL a completed job answers with and the requests for it.
// - Expiry (`urlTtlSeconds`): a URL stops working that long after it was issued, answered 403 with an XML
//   body, as object stores answer an expired signed URL. With `freshUrlOnCheck`, a status check after that
//   issues a new URL (a new token in its path) that works for another TTL; without it, the old one again.
// - Redirects (`redirectResults`): /files/... answers `302 Found` to /cdn/hop<n>/..., which chains down to
//   /cdn/..., which serves the bytes: an object store sending the client on to its CDN.
// video-faults.ts decides the bytes.
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { HttpError } from './http';
import type { Job } from './jobs';
import type { SimulatorState } from './state';
import { videoBytes } from './video-faults';

/** Whether a path is one the result URLs (or their redirects) use. */
export const isResultPath = (path: string): boolean => path.startsWith('/files/') || path.startsWith('/cdn/');

/** When the job's current URL stops working (epoch ms), or 0 when URLs do not expire. */
function currentExpiry(state: SimulatorState, job: Job): number {
  const ttl = state.options.urlTtlSeconds;
  // Whole ms: job times carry the latency jitter's fractions, which have no place in a URL.
  return ttl > 0 ? Math.ceil((job.urlIssuedAt ?? job.doneAt) + ttl * 1000) : 0;
}

/**
 * The job's video URL on this simulator, with its expiry time when URLs expire. A status check past that
 * expiry gets a new URL when `freshUrlOnCheck` is on (`fresh`: the caller is such a check).
 */
export function resultUrl(state: SimulatorState, origin: string, job: Job, fresh = false): string {
  let expires = currentExpiry(state, job);
  if (fresh && expires && state.options.freshUrlOnCheck && state.now() > expires) {
    // A new token, so the new URL differs from the expired one as a newly signed URL does.
    job.urlToken = `t${randomBytes(8).toString('hex')}`;
    job.urlIssuedAt = state.now();
    state.stats.freshUrlsIssued += 1;
    expires = currentExpiry(state, job);
  }
  const token = job.urlToken ? `${job.urlToken}/` : '';
  return `${origin}/files/${token}${job.id}.mp4${expires ? `?expires=${expires}` : ''}`;
}

/** S3's answer to an expired presigned URL, in short: what a downloader meets in the wild. */
function expiredAnswer(res: ServerResponse): number {
  const body =
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>' +
    '<Message>Request has expired</Message></Error>';
  res.writeHead(403, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
  res.end(body);
  return 403;
}

/**
 * Answers a request for a result URL or one of its redirects; returns the status sent.
 * Paths: /files/[<token>/]<job id>.mp4, /cdn/hop<n>/[<token>/]<job id>.mp4 (n hops to go), /cdn/[...].mp4.
 */
export function serveFile(
  state: SimulatorState,
  res: ServerResponse,
  path: string,
  query: URLSearchParams,
): number {
  const onCdn = path.startsWith('/cdn/');
  const segments = path.slice(onCdn ? '/cdn/'.length : '/files/'.length).split('/');
  const hop = onCdn ? /^hop(\d+)$/.exec(segments[0] ?? '') : null;
  if (hop) segments.shift();
  const hopsLeft = onCdn ? (hop ? Number(hop[1]) : 0) : state.options.redirectResults;
  const [token, file] = segments.length === 2 ? segments : [undefined, segments[0]];
  const id = decodeURIComponent(file ?? '').replace(/\.mp4$/, '');
  const job = segments.length <= 2 ? state.jobs.get(id) : undefined;
  if (!job || state.jobStatus(job) !== 'completed') throw new HttpError(404, 'not_found', 'No such file.');
  const expires = Number(query.get('expires') ?? 0);
  if (expires && state.now() > expires) {
    state.stats.expiredUrlRequests += 1;
    return expiredAnswer(res);
  }
  // A token this job never had: a made-up URL.
  if (token !== undefined && token !== job.urlToken) throw new HttpError(404, 'not_found', 'No such file.');
  if (hopsLeft > 0) {
    // Relative, with the query kept: the next hop is on this server, and the expiry goes along.
    const rest = `${token ? `${token}/` : ''}${file}${query.size ? `?${query.toString()}` : ''}`;
    const location = hopsLeft > 1 ? `/cdn/hop${hopsLeft - 1}/${rest}` : `/cdn/${rest}`;
    state.stats.redirectsServed += 1;
    res.writeHead(302, { location, 'content-length': 0 });
    res.end();
    return 302;
  }
  const bytes = videoBytes(job);
  state.stats.videosServed += 1;
  res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': bytes.length });
  res.end(bytes);
  return 200;
}
