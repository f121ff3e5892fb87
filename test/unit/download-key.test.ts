// A video the provider serves itself is fetched with its key, and the key goes only to URLs under the base
// URL: never to another origin a redirect leads to, nor back to the API after such a hop.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { downloadVerified, underBase } from '../../src/results/download';
import { tinyMp4 } from '../../src/simulator/mp4';

const servers: Server[] = [];
afterEach(() => {
  while (servers.length) servers.pop()?.close();
});

/** A server that records the Authorization header of each request and answers as `answer` says. */
async function server(answer: (path: string) => { status: number; location?: string }) {
  const seen: { path: string; authorization?: string }[] = [];
  const s = createServer((req, res) => {
    const path = req.url ?? '/';
    seen.push({ path, ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) });
    const { status, location } = answer(path);
    if (status === 200) {
      const body = tinyMp4('key-test');
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': body.length });
      return res.end(body);
    }
    res.writeHead(status, location ? { location } : {});
    res.end();
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  servers.push(s);
  return { origin: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, seen };
}

describe('the key on a download', () => {
  it('goes to the API only, not to the CDN it redirects to, nor back to the API after it', async () => {
    const cdn = await server((path) =>
      path === '/bounce' ? { status: 302, location: `${api.origin}/v1/again` } : { status: 200 },
    );
    const api = await server((path) =>
      path === '/v1/videos/v1/content'
        ? { status: 302, location: `${cdn.origin}/bounce` }
        : path === '/v1/again'
          ? { status: 302, location: '/outside/v.mp4' }
          : { status: 200 },
    );
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-key-'));
    const auth = { base: `${api.origin}/v1`, headers: { authorization: 'Bearer sk-secret' } };
    await downloadVerified(`${api.origin}/v1/videos/v1/content`, dir, 'a.mp4', { auth, timeoutMs: 5000 });
    expect(api.seen[0]).toEqual({ path: '/v1/videos/v1/content', authorization: 'Bearer sk-secret' });
    expect(cdn.seen).toEqual([{ path: '/bounce' }]);
    // Back on the API's origin after the CDN, even under the base URL: still no key.
    expect(api.seen.slice(1)).toEqual([{ path: '/v1/again' }, { path: '/outside/v.mp4' }]);
  });

  it('is not sent to a path of the origin outside the base URL', async () => {
    const api = await server((path) =>
      path === '/v1/content' ? { status: 302, location: '/files/v.mp4' } : { status: 200 },
    );
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-key-'));
    const auth = { base: `${api.origin}/v1`, headers: { authorization: 'Bearer sk-secret' } };
    await downloadVerified(`${api.origin}/v1/content`, dir, 'a.mp4', { auth, timeoutMs: 5000 });
    expect(api.seen).toEqual([
      { path: '/v1/content', authorization: 'Bearer sk-secret' },
      { path: '/files/v.mp4' },
    ]);
  });

  it('knows what is under a base URL', () => {
    const base = 'https://api.example/api/v1';
    expect(underBase(new URL('https://api.example/api/v1/videos/x/content'), base)).toBe(true);
    expect(underBase(new URL('https://api.example/api/v1'), base)).toBe(true);
    expect(underBase(new URL('https://api.example/api/v10/x'), base)).toBe(false);
    expect(underBase(new URL('http://api.example/api/v1/x'), base)).toBe(false);
    expect(underBase(new URL('https://cdn.example/api/v1/x'), base)).toBe(false);
    expect(underBase(new URL('https://api.example/x'), 'https://api.example')).toBe(true);
  });
});
