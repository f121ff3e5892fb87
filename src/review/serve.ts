// `vidbatch review --serve`: the gallery and the batch's videos on 127.0.0.1 (node:http). The page polls
// `data.json` for the rows changed since the version it holds (row-versions.ts), so cards update as rows
// finish during a run. The data is rebuilt from the files on disk when they changed, at most once per two
// seconds and never more than a fifth of the time (a 100,000-row batch takes seconds to rebuild).
// Videos are served with byte ranges (browsers seek and read metadata with Range requests); only the files the
// manifest names for a row are served, never a path from the request. A video kept in the store and not
// downloaded here is streamed from the store, range by range.
import { createReadStream, existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { journalPath } from '../results/jobs-journal';
import { objectAt } from '../store/open-store';
import { isStoreUrl } from '../store/store-url';
import { localFileOf, type ReviewData } from './data';
import { CsvPart, loadSources, reviewDataOf, type ReviewTarget } from './load';
import { reviewPage } from './page';
import { RowVersions } from './row-versions';

/** The page polls every 2 s: no rebuild is needed more often. */
const MIN_REBUILD_MS = 2000;

export interface ReviewServer {
  url: string;
  server: Server;
  close(): Promise<void>;
}

/** The server's URL of a row's video. */
export const videoPath = (rowId: string) => `video/${encodeURIComponent(rowId)}`;

/** A change stamp of the files the page is made from (size and mtime of manifest and journal). */
async function stamp(t: ReviewTarget): Promise<string> {
  // Objects in a store have no cheap stamp: every rebuild reads them (rebuilds are rate-limited below).
  if (isStoreUrl(t.manifestPath)) return String(Date.now());
  const parts = await Promise.all(
    [t.manifestPath, journalPath(t.outDir)].map((p) =>
      stat(p).then(
        (s) => `${s.size}:${s.mtimeMs}`,
        () => '-',
      ),
    ),
  );
  return parts.join('/');
}

/** Parses `bytes=a-b`, `bytes=a-`, `bytes=-n` (one range); null when unsatisfiable, undefined when absent. */
export function byteRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | null | undefined {
  const m = header && /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m) return undefined;
  const [, a, b] = m;
  let start: number;
  let end: number;
  if (a === '') {
    if (b === '') return undefined;
    start = Math.max(0, size - Number(b));
    end = size - 1;
  } else {
    start = Number(a);
    end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  }
  return start <= end && start < size ? { start, end } : null;
}

/** A row's video from this machine's file, or streamed from the store (the page's server holds the credentials). */
async function sendVideo(req: IncomingMessage, res: ServerResponse, file: string): Promise<void> {
  const stored = isStoreUrl(file) ? await objectAt(file) : undefined;
  const size = stored ? (await stored.store.head(stored.key))?.size : (await stat(file)).size;
  if (size === undefined) {
    res.writeHead(404).end('the video is not in the store');
    return;
  }
  const range = byteRange(req.headers.range, size);
  const headers = { 'content-type': 'video/mp4', 'accept-ranges': 'bytes', 'cache-control': 'no-cache' };
  if (range === null) {
    res.writeHead(416, { ...headers, 'content-range': `bytes */${size}` }).end();
    return;
  }
  const { start, end } = range ?? { start: 0, end: size - 1 };
  res.writeHead(range ? 206 : 200, {
    ...headers,
    'content-length': size === 0 ? 0 : end - start + 1,
    ...(range ? { 'content-range': `bytes ${start}-${end}/${size}` } : {}),
  });
  if (req.method === 'HEAD' || size === 0) {
    res.end();
    return;
  }
  const body = stored
    ? Readable.from((await stored.store.stream(stored.key, { start, end })) ?? [])
    : createReadStream(file, { start, end });
  body.on('error', () => res.destroy()).pipe(res);
}

export async function serveReview(t: ReviewTarget, port: number): Promise<ReviewServer> {
  const links = { pageDir: t.pageDir, serverUrl: videoPath };
  let cached: { stamp: string; data: ReviewData; files: Map<string, string> } | undefined;
  const csv = new CsvPart();
  const versions = new RowVersions();
  let builtAt = 0;
  let buildMs = 0;
  let building: Promise<void> | undefined;
  const rebuild = async () => {
    const now = await stamp(t);
    if (cached?.stamp === now) return;
    const started = Date.now();
    // One read of the files makes both the page's data and the map of videos served.
    const sources = await loadSources(t, csv);
    const files = new Map<string, string>();
    for (const r of sources.manifest) {
      const file = localFileOf(r, t.pageDir);
      // A video kept in the store and not downloaded here is streamed from the store.
      if (file) files.set(r.rowId, existsSync(file) || !r.file ? file : r.file);
    }
    cached = { stamp: now, data: await reviewDataOf(sources, t, links), files };
    versions.update(cached.data);
    builtAt = Date.now();
    buildMs = builtAt - started;
  };
  const current = async () => {
    if (!cached || Date.now() - builtAt >= Math.max(MIN_REBUILD_MS, 4 * buildMs)) {
      building ??= rebuild().finally(() => (building = undefined));
      await building;
    }
    return cached!;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    // Only this machine's names: a web page that rebinds its own host name to 127.0.0.1 must not read the
    // batch's prompts, provider URLs and videos (DNS rebinding).
    const host = (req.headers.host ?? '').replace(/:\d+$/, '');
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(host)) {
      res.writeHead(403, { 'content-type': 'text/plain' }).end('forbidden host');
      return;
    }
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://localhost').pathname);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/' || path === '/review.html') {
      await current();
      const html = await reviewPage(versions.since(), { live: true });
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      res.end(html);
    } else if (path === '/data.json') {
      // `since`: the version the page holds; it gets the rows changed after it, or a 304 when none did.
      await current();
      const since = new URL(req.url ?? '/', 'http://localhost').searchParams.get('since') ?? undefined;
      const headers = { 'content-type': 'application/json', 'cache-control': 'no-store' };
      if (since === versions.tag) res.writeHead(304, headers).end();
      else res.writeHead(200, headers).end(JSON.stringify(versions.since(since)));
    } else if (path.startsWith('/video/')) {
      const file = (await current()).files.get(path.slice('/video/'.length));
      if (!file) res.writeHead(404).end('no downloaded video for this row');
      else await sendVideo(req, res, file);
    } else res.writeHead(404).end('not found');
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(err instanceof Error ? err.message : String(err));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}/`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections(); // keep-alive connections of the browser would hold it open
      }),
  };
}
