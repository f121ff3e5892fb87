import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { downloadVerified } from '../../src/results/download';
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
      res.writeHead(206, { 'content-type': contentType, 'content-length': body.length - from });
      return res.end(body.subarray(from));
    }
    res.writeHead(status, { 'content-type': contentType, 'content-length': body.length });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v.mp4`, ranges };
}

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
    const got = await downloadVerified(url, dir, 'b.mp4');
    expect(ranges).toEqual(['bytes=40-']);
    expect(await readFile(got.file)).toEqual(video);
    expect(got.sha256).toBe(sha);
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
});
