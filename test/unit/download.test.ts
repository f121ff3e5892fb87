import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_MAX_VIDEO_BYTES, downloadVerified, parseContentRange } from '../../src/results/download';
import { downloadBatch } from '../../src/results/download-batch';
import { URL_EXPIRED_CODE, type PromptResult } from '../../src/contract/prompt';
import { appendResults, readManifest } from '../../src/results/manifest';
import { DownloadError } from '../../src/errors';
import { tinyMp4 } from '../../src/simulator/mp4';

const servers: Server[] = [];
afterEach(() => {
  while (servers.length) servers.pop()?.close();
});

/** A file server with Range support, counting the Range headers it saw. */
async function serve(body: Buffer, contentType = 'video/mp4', status = 200) {
  const ranges: string[] = [];
  const server = createServer((req, res) => {
    const range = /bytes=(\d+)-/.exec(req.headers.range ?? '');
    if (range && status === 200) {
      ranges.push(req.headers.range!);
      const from = Number(range[1]);
      res.writeHead(206, {
        'content-type': contentType,
        'content-length': body.length - from,
        'content-range': `bytes ${from}-${body.length - 1}/${body.length}`,
      });
      return res.end(body.subarray(from));
    }
    res.writeHead(status, { 'content-type': contentType, 'content-length': body.length });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v.mp4`, ranges };
}

/** A server whose answers the test writes; `seen` lists each request's path and headers, in order. */
async function routes(handler: (req: IncomingMessage, res: ServerResponse, base: string) => void) {
  const seen: { path: string; headers: IncomingMessage['headers'] }[] = [];
  const server = createServer((req, res) => {
    seen.push({ path: req.url ?? '', headers: req.headers });
    handler(req, res, base);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  servers.push(server);
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, seen };
}

/** The video with Range support (a correct 206 and Content-Range), as a CDN serves it. */
function sendVideo(req: IncomingMessage, res: ServerResponse) {
  const range = /bytes=(\d+)-/.exec(req.headers.range ?? '');
  const from = range ? Number(range[1]) : 0;
  res.writeHead(range ? 206 : 200, {
    'content-type': 'video/mp4',
    'content-length': video.length - from,
    ...(range ? { 'content-range': `bytes ${from}-${video.length - 1}/${video.length}` } : {}),
  });
  res.end(video.subarray(from));
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => expect.fail('expected the download to fail'),
    (e: unknown) => e as DownloadError,
  );

const video = tinyMp4('vid_test', 5);
const sha = createHash('sha256').update(video).digest('hex');

describe('downloadVerified', () => {
  it('downloads, verifies and hashes; a second call reuses the verified file without rewriting it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const { url } = await serve(video);
    const first = await downloadVerified(url, dir, 'a.mp4');
    expect(first).toMatchObject({
      file: join(dir, 'a.mp4'),
      sha256: sha,
      bytes: video.length,
      reused: false,
    });
    const mtime = (await stat(first.file)).mtimeMs;
    const second = await downloadVerified(url, dir, 'a.mp4', { expectedSha256: sha });
    expect(second.reused).toBe(true);
    expect((await stat(first.file)).mtimeMs).toBe(mtime);
  });

  it('resumes a partial download with a Range request', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const { url, ranges } = await serve(video);
    await writeFile(join(dir, 'b.mp4.part'), video.subarray(0, 40));
    await writeFile(join(dir, 'b.mp4.part.json'), JSON.stringify({ url }));
    const got = await downloadVerified(url, dir, 'b.mp4');
    expect(ranges).toEqual(['bytes=40-']);
    expect(await readFile(got.file)).toEqual(video);
    expect(got.sha256).toBe(sha);
    await expect(stat(join(dir, 'b.mp4.part.json'))).rejects.toThrow();
  });

  it('resumes a partial file only for the URL it came from', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const { url, ranges } = await serve(video);
    const foreign = tinyMp4('another batch').subarray(0, 40);
    await writeFile(join(dir, 'd.mp4.part'), foreign);
    await writeFile(join(dir, 'd.mp4.part.json'), JSON.stringify({ url: 'http://elsewhere/v.mp4' }));
    const got = await downloadVerified(url, dir, 'd.mp4');
    expect(ranges).toEqual([]);
    expect(got.sha256).toBe(sha);
    // no sidecar at all: not resumed either
    await writeFile(join(dir, 'e.mp4.part'), video.subarray(0, 40));
    await downloadVerified(url, dir, 'e.mp4');
    expect(ranges).toEqual([]);
  });

  it('without a recorded hash, reuses an existing file only when it is the same video, else keeps both', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const { url } = await serve(video);
    await writeFile(join(dir, 'f.mp4'), video);
    expect(await downloadVerified(url, dir, 'f.mp4')).toMatchObject({ reused: true, sha256: sha });
    const other = tinyMp4('another video');
    await writeFile(join(dir, 'g.mp4'), other);
    const got = await downloadVerified(url, dir, 'g.mp4');
    expect(got).toMatchObject({ reused: false, sha256: sha, file: join(dir, `g.${sha.slice(0, 12)}.mp4`) });
    expect(await readFile(join(dir, 'g.mp4'))).toEqual(other);
    expect(await readFile(got.file)).toEqual(video);
  });

  it('refuses expired links, wrong content types and files that are not MP4', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const expired = await serve(video, 'video/mp4', 410);
    const error = (await downloadVerified(expired.url, dir, 'x.mp4').catch(
      (e: unknown) => e,
    )) as DownloadError;
    expect(error).toBeInstanceOf(DownloadError);
    expect(error.message).toContain('link expired');
    expect(error.retryable).toBe(false);
    // The status goes along, so the workflow can ask the job for a fresh URL.
    expect(error.httpStatus).toBe(410);
    const forbidden = await serve(video, 'video/mp4', 403);
    expect(await failure(downloadVerified(forbidden.url, dir, 'x.mp4'))).toMatchObject({
      httpStatus: 403,
      retryable: false,
    });
    const html = await serve(Buffer.from('<html>login</html>'), 'text/html');
    await expect(downloadVerified(html.url, dir, 'y.mp4')).rejects.toThrow(/content type text\/html/);
    const junk = await serve(Buffer.from('this is not a video at all'), 'video/mp4');
    await expect(downloadVerified(junk.url, dir, 'z.mp4')).rejects.toThrow(/not an MP4/);
    await expect(stat(join(dir, 'z.mp4'))).rejects.toThrow();
  });

  it('never overwrites a file whose hash differs from the recorded one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const { url } = await serve(video);
    const other = tinyMp4('another video');
    await writeFile(join(dir, 'c.mp4'), other);
    await expect(downloadVerified(url, dir, 'c.mp4', { expectedSha256: sha })).rejects.toThrow(
      /not overwriting/,
    );
    expect(await readFile(join(dir, 'c.mp4'))).toEqual(other);
  });

  // Object stores answer 302 to a CDN path: followed, relative Locations resolved against the current URL.
  it('follows a redirect chain (relative and absolute Locations) to the video, sending no credentials', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const { base, seen } = await routes((req, res, base) => {
      const to = { '/a/start': 'next', '/a/next': `${base}/b/c`, '/b/c': '../cdn/v.mp4' }[req.url ?? ''];
      if (to) return res.writeHead(req.url === '/a/next' ? 301 : 302, { location: to }).end();
      sendVideo(req, res);
    });
    const got = await downloadVerified(`${base}/a/start`, dir, 'r.mp4');
    expect(seen.map((r) => r.path)).toEqual(['/a/start', '/a/next', '/b/c', '/cdn/v.mp4']);
    expect(await readFile(got.file)).toEqual(video);
    expect(got.sha256).toBe(sha);
    for (const { headers } of seen) {
      expect(headers.authorization).toBeUndefined();
      expect(headers.cookie).toBeUndefined();
    }
  });

  it('keeps the Range of a resumed download on the redirected request', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const { base, seen } = await routes((req, res) =>
      req.url === '/signed' ? res.writeHead(307, { location: '/cdn/v.mp4' }).end() : sendVideo(req, res),
    );
    const url = `${base}/signed`;
    await writeFile(join(dir, 'k.mp4.part'), video.subarray(0, 40));
    await writeFile(join(dir, 'k.mp4.part.json'), JSON.stringify({ url }));
    const got = await downloadVerified(url, dir, 'k.mp4');
    expect(seen.map((r) => [r.path, r.headers.range])).toEqual([
      ['/signed', 'bytes=40-'],
      ['/cdn/v.mp4', 'bytes=40-'],
    ]);
    expect(await readFile(got.file)).toEqual(video);
  });

  it('follows 5 redirects, and fails on the 6th (a loop), not retryable', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const { base, seen } = await routes((req, res) => {
      const hop = /^\/hop(\d+)$/.exec(req.url ?? '');
      if (hop && hop[1] !== '0') return res.writeHead(302, { location: `/hop${Number(hop[1]) - 1}` }).end();
      if (req.url === '/loop') return res.writeHead(302, { location: '/loop' }).end();
      sendVideo(req, res);
    });
    expect((await downloadVerified(`${base}/hop5`, dir, 'five.mp4')).sha256).toBe(sha);
    seen.length = 0;
    const error = await failure(downloadVerified(`${base}/loop`, dir, 'loop.mp4'));
    expect(error).toBeInstanceOf(DownloadError);
    expect(error.message).toContain(`${base}/loop: more than 5 redirects`);
    expect(error.retryable).toBe(false);
    expect(seen).toHaveLength(6); // the first request and 5 redirects followed
  });

  it('refuses a redirect to another scheme (ftp:) and a non-http URL, naming the URL and scheme', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const { base } = await routes((_req, res) =>
      res.writeHead(302, { location: 'ftp://files.example/v.mp4' }).end(),
    );
    const error = await failure(downloadVerified(`${base}/v.mp4`, dir, 'f.mp4'));
    expect(error).toBeInstanceOf(DownloadError);
    expect(error.message).toBe(
      `${base}/v.mp4: redirected to ftp://files.example/v.mp4, scheme ftp: is not http or https`,
    );
    expect(error.retryable).toBe(false);
    const local = await failure(downloadVerified('file:///etc/passwd', dir, 'p.mp4'));
    expect(local.message).toBe('file:///etc/passwd: scheme file: is not http or https');
    expect(local.retryable).toBe(false);
  });

  // Appending bytes from another offset than the part's size would make a corrupt file that may still start
  // with ftyp; the part is discarded and the file downloaded again from 0.
  it('restarts from 0 when a 206 to a Range request has a wrong or missing Content-Range', async () => {
    for (const contentRange of [`bytes 0-${video.length - 1}/${video.length}`, undefined, 'bytes */99']) {
      const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
      const { base, seen } = await routes((req, res) => {
        if (!req.headers.range) return sendVideo(req, res);
        // A server that ignores the offset asked for, but answers 206 anyway.
        res.writeHead(206, {
          'content-type': 'video/mp4',
          'content-length': video.length,
          ...(contentRange ? { 'content-range': contentRange } : {}),
        });
        res.end(video);
      });
      const url = `${base}/v.mp4`;
      await writeFile(join(dir, 'w.mp4.part'), video.subarray(0, 40));
      await writeFile(join(dir, 'w.mp4.part.json'), JSON.stringify({ url }));
      const got = await downloadVerified(url, dir, 'w.mp4');
      expect(seen.map((r) => r.headers.range)).toEqual(['bytes=40-', undefined]);
      expect(await readFile(got.file)).toEqual(video);
    }
  });

  it('a 200 to a Range request (Range ignored) rewrites the part from 0, never appends', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const { base, seen } = await routes((req, res) => {
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': video.length });
      res.end(video);
    });
    const url = `${base}/v.mp4`;
    await writeFile(join(dir, 'o.mp4.part'), video.subarray(0, 40));
    await writeFile(join(dir, 'o.mp4.part.json'), JSON.stringify({ url }));
    const got = await downloadVerified(url, dir, 'o.mp4');
    expect(seen.map((r) => r.headers.range)).toEqual(['bytes=40-']);
    expect(await readFile(got.file)).toEqual(video);
  });

  it('a 206 that stops before the total is short: retryable, its bytes kept to resume', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const { base } = await routes((req, res) => {
      // Bytes 40-99 of the file only, correctly labelled: the server's own chunk size.
      res.writeHead(206, {
        'content-type': 'video/mp4',
        'content-length': 60,
        'content-range': `bytes 40-99/${video.length}`,
      });
      res.end(video.subarray(40, 100));
    });
    const url = `${base}/v.mp4`;
    await writeFile(join(dir, 's.mp4.part'), video.subarray(0, 40));
    await writeFile(join(dir, 's.mp4.part.json'), JSON.stringify({ url }));
    const error = await failure(downloadVerified(url, dir, 's.mp4'));
    expect(error.message).toBe(`${url}: got 100 bytes, expected ${video.length}`);
    expect(error.retryable).toBe(true);
    expect(await readFile(join(dir, 's.mp4.part'))).toEqual(video.subarray(0, 100));
  });

  it('fails before reading when Content-Length is over maxBytes, not retryable', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    const { base } = await routes((_req, res) => {
      // Headers and a first chunk, then nothing: a client that read the body would wait for its timeout.
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': 10 * video.length });
      res.write(video);
    });
    const url = `${base}/big.mp4`;
    const error = await failure(
      downloadVerified(url, dir, 'big.mp4', { maxBytes: video.length, timeoutMs: 30_000 }),
    );
    expect(error).toBeInstanceOf(DownloadError);
    expect(error.message).toBe(
      `${url}: ${10 * video.length} bytes announced, over the download limit of ${video.length} bytes`,
    );
    expect(error.retryable).toBe(false);
    await expect(stat(join(dir, 'big.mp4.part'))).rejects.toThrow();
    await expect(stat(join(dir, 'big.mp4.part.json'))).rejects.toThrow();
  });

  it('aborts a chunked body (no Content-Length) once it passes maxBytes, not retryable', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dl-'));
    let closed!: Promise<void>;
    const { base } = await routes((_req, res) => {
      closed = new Promise((r) => res.on('close', () => r()));
      res.writeHead(200, { 'content-type': 'video/mp4' }); // no length: chunked
      // An endless body: only the cap can end this download.
      const timer = setInterval(() => res.write(video), 5);
      res.on('close', () => clearInterval(timer));
    });
    const url = `${base}/endless.mp4`;
    const maxBytes = 4 * video.length + 7;
    const error = await failure(downloadVerified(url, dir, 'e.mp4', { maxBytes, timeoutMs: 30_000 }));
    expect(error.message).toBe(
      `${url}: body passed ${maxBytes} bytes while streaming, over the download limit of ${maxBytes} bytes`,
    );
    expect(error.retryable).toBe(false);
    await closed; // the connection was dropped, not read to the end
    await expect(stat(join(dir, 'e.mp4.part'))).rejects.toThrow();
  });

  it('the default cap is 2 GiB', () => {
    expect(DEFAULT_MAX_VIDEO_BYTES).toBe(2 * 1024 ** 3);
  });
});

describe('parseContentRange', () => {
  it('reads start, end and total, and refuses what does not add up', () => {
    expect(parseContentRange('bytes 40-99/100')).toEqual({ start: 40, end: 99, total: 100 });
    expect(parseContentRange('bytes 0-9/*')).toEqual({ start: 0, end: 9 });
    for (const bad of [undefined, '', 'bytes */100', 'bytes 9-0/100', 'bytes 0-100/100', 'items 0-1/2'])
      expect(parseContentRange(bad), String(bad)).toBeUndefined();
  });
});

describe("downloadBatch: the manifest is the one record of each row's file", () => {
  /** A manifest of rows whose jobs completed; each row's URL is `<base>/<path>`. */
  async function batchFolder(rows: Partial<PromptResult>[]) {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-dlb-'));
    const base = { line: 2, prompt: 'p', model: 'm', input: {}, parameters: {}, attempts: 1, polls: 1 };
    await appendResults(
      dir,
      rows.map((r, i): PromptResult => ({
        ...base,
        rowId: `r${i + 1}`,
        status: 'succeeded',
        finishedAt: 'T',
        ...r,
      })),
    );
    return { dir, manifest: join(dir, 'manifest.jsonl') };
  }

  it('keeps files the run downloaded, fetches the rest beside the manifest and records them there', async () => {
    const { base, seen } = await routes((req, res) => sendVideo(req, res));
    const folder = await mkdtemp(join(tmpdir(), 'vidbatch-dlb-'));
    const kept = join(folder, 'r1.mp4');
    await writeFile(kept, video);
    const { dir, manifest } = await batchFolder([
      { url: `${base}/a.mp4`, jobId: 'vid_a', file: kept, sha256: sha, bytes: video.length },
      { url: `${base}/b.mp4`, jobId: 'vid_b' },
    ]);
    const reports = await downloadBatch(manifest);
    expect(reports).toMatchObject([
      { rowId: 'r1', file: kept, reused: true },
      { rowId: 'r2', file: join(dir, 'r2.mp4'), sha256: sha },
    ]);
    expect(reports[1]!.verification).toBeDefined();
    expect(seen.map((s) => s.path)).toEqual(['/b.mp4']);
    const rows = await readManifest(manifest);
    expect(rows[0]).toMatchObject({ rowId: 'r1', file: kept });
    expect(rows[1]).toMatchObject({
      rowId: 'r2',
      file: join(dir, 'r2.mp4'),
      sha256: sha,
      status: 'succeeded',
    });
    expect(rows[1]!.downloadedAt).toBeDefined();
    // Again: both are on disk as recorded; nothing is fetched, nothing appended.
    const lines = (await readFile(manifest, 'utf8')).split('\n').length;
    expect((await downloadBatch(manifest)).every((r) => r.reused)).toBe(true);
    expect(seen).toHaveLength(1);
    expect((await readFile(manifest, 'utf8')).split('\n').length).toBe(lines);
  });

  it('asks the job again once for a URL that answers 403, and a url_expired row becomes succeeded', async () => {
    const { base, seen } = await routes((req, res) => {
      if (req.url?.startsWith('/fresh/')) return sendVideo(req, res);
      res.writeHead(403, { 'content-type': 'application/xml' });
      res.end('<Error><Code>AccessDenied</Code></Error>');
    });
    const { manifest } = await batchFolder([
      { url: `${base}/old/a.mp4`, jobId: 'vid_a' },
      {
        url: `${base}/old/b.mp4`,
        jobId: 'vid_b',
        status: 'failed',
        errorCode: URL_EXPIRED_CODE,
        errorMessage: 'expired',
      },
      { url: `${base}/old/c.mp4`, jobId: 'vid_c' },
    ]);
    const asked: string[] = [];
    const reports = await downloadBatch(manifest, {
      retryDelayMs: 1,
      currentUrl: (jobId) => {
        asked.push(jobId);
        return Promise.resolve(jobId === 'vid_c' ? `${base}/old/c.mp4` : `${base}/fresh/${jobId}.mp4`);
      },
    });
    expect(asked.sort()).toEqual(['vid_a', 'vid_b', 'vid_c']);
    expect(reports[0]).toMatchObject({ rowId: 'r1', freshUrl: `${base}/fresh/vid_a.mp4`, sha256: sha });
    expect(reports[1]).toMatchObject({ rowId: 'r2', freshUrl: `${base}/fresh/vid_b.mp4`, sha256: sha });
    expect(reports[2]!.error).toMatch(/HTTP 403.*job vid_c, asked again, gave the same URL/);
    // The url_expired row was asked first: its recorded URL is known to fail.
    expect(seen.filter((s) => s.path === '/old/b.mp4')).toHaveLength(0);
    const rows = await readManifest(manifest);
    expect(rows[1]).toMatchObject({ status: 'succeeded', url: `${base}/fresh/vid_b.mp4`, jobId: 'vid_b' });
    expect(rows[1]!.errorCode).toBeUndefined();
    expect(rows[2]).toMatchObject({ status: 'succeeded', url: `${base}/old/c.mp4` });
    expect(rows[2]!.file).toBeUndefined();
  });

  it('asks the jobs of rows that ended deadline_exceeded or cancelled, and keeps a video that arrived late', async () => {
    const { base, seen } = await routes((req, res) => sendVideo(req, res));
    const ended = (jobId: string, errorCode: string): Partial<PromptResult> => ({
      jobId,
      status: 'failed',
      errorCode,
      errorMessage: 'vidbatch stopped waiting',
    });
    const { dir, manifest } = await batchFolder([
      ended('vid_a', 'deadline_exceeded'),
      ended('vid_b', 'cancelled'),
      ended('vid_c', 'deadline_exceeded'), // still running at the gateway
      ended('vid_d', 'deadline_exceeded'), // a worker checks it: left to it
      { status: 'failed', errorCode: 'job_failed', jobId: 'vid_e' }, // the gateway ended it: not asked
    ]);
    const asked: string[] = [];
    const currentUrl = (jobId: string) => {
      asked.push(jobId);
      return Promise.resolve(jobId === 'vid_c' ? undefined : `${base}/${jobId}.mp4`);
    };
    // Without `late`, as before: none of them is downloadable.
    expect(await downloadBatch(manifest, { currentUrl })).toEqual([]);
    const reports = await downloadBatch(manifest, { currentUrl, late: { served: new Set(['r4']) } });
    expect(asked.sort()).toEqual(['vid_a', 'vid_b', 'vid_c']);
    expect(reports).toMatchObject([
      { rowId: 'r1', late: 'arrived', file: join(dir, 'r1.mp4'), sha256: sha },
      { rowId: 'r2', late: 'arrived', file: join(dir, 'r2.mp4'), sha256: sha },
      { rowId: 'r3', late: 'none' },
      { rowId: 'r4', late: 'served' },
    ]);
    expect(seen.map((r) => r.path).sort()).toEqual(['/vid_a.mp4', '/vid_b.mp4']);
    const rows = await readManifest(manifest);
    expect(rows[0]).toMatchObject({
      status: 'succeeded',
      jobId: 'vid_a',
      url: `${base}/vid_a.mp4`,
      file: join(dir, 'r1.mp4'),
      arrivedLate: { endedAs: 'deadline_exceeded', endedAt: 'T' },
    });
    expect(rows[0]!.errorCode).toBeUndefined();
    expect(rows[1]).toMatchObject({ status: 'succeeded', arrivedLate: { endedAs: 'cancelled' } });
    expect(rows.slice(2).map((r) => r.status)).toEqual(['failed', 'failed', 'failed']);
    // Again: the kept ones are on disk as recorded; only the job with no video is asked again.
    asked.length = 0;
    const again = await downloadBatch(manifest, { currentUrl, late: {} });
    expect(again.filter((r) => r.reused).map((r) => r.rowId)).toEqual(['r1', 'r2']);
    expect(asked.sort()).toEqual(['vid_c', 'vid_d']);
  });

  it('records each video as soon as it is verified: a download stopped part-way keeps what it fetched', async () => {
    // When each video is asked for, which rows the manifest already records a file for.
    const recordedAtAsk: string[][] = [];
    let manifestPath = '';
    const { base } = await routes((req, res) => {
      void readManifest(manifestPath).then((rows) => {
        recordedAtAsk.push(rows.filter((r) => r.file).map((r) => r.rowId));
        sendVideo(req, res);
      });
    });
    const { manifest } = await batchFolder([
      { url: `${base}/a.mp4`, jobId: 'vid_a' },
      { url: `${base}/b.mp4`, jobId: 'vid_b' },
      { url: `${base}/c.mp4`, jobId: 'vid_c' },
    ]);
    manifestPath = manifest;
    await downloadBatch(manifest, { concurrency: 1 });
    expect(recordedAtAsk).toEqual([[], ['r1'], ['r1', 'r2']]);
    expect((await readManifest(manifest)).map((r) => r.file !== undefined)).toEqual([true, true, true]);
  });
});
