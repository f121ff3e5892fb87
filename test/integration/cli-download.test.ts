// `vidbatch download` stopped part-way, from the command line: the real `vidbatch` (spawned) against this
// test's Temporal server, worker and simulator. Between them a link the test holds shut after a few videos, so
// the download is surely in the middle of a video when Ctrl-C comes. What it fetched before is in the
// manifest; a second `download` fetches only the rest, and the simulator served each video once.
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { readManifest } from '../../src/results/manifest';
import { background, exitAndOutput, FAST_POLL_FLAGS, manifestPathOf, vidbatch } from './cli-helpers';
import { cliSettings, testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
let proxy: Server | undefined;
afterEach(async () => {
  proxy?.close();
  proxy = undefined;
  await env?.close();
  env = undefined;
});

/**
 * A link to the simulator whose video requests the test lets through: the first `allowed` at once, the rest
 * held until `open()`. Job answers name the link's URLs, so the batch's manifest does too. A held request
 * whose downloader went away is never passed on, so the simulator counts only videos someone received.
 */
async function videoGate(origin: string, allowed: number) {
  let passed = 0;
  let opened = false;
  const held: (() => void)[] = [];
  proxy = createServer((req, res) => {
    void (async () => {
      const isVideo = req.url?.startsWith('/files/') === true;
      if (isVideo && !opened && passed >= allowed) {
        let gone = false;
        res.on('close', () => (gone = true));
        await new Promise<void>((release) => held.push(release));
        if (gone) return;
      }
      if (isVideo) passed += 1;
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const headers: Record<string, string> = {};
      for (const name of ['authorization', 'content-type', 'idempotency-key', 'range'])
        if (typeof req.headers[name] === 'string') headers[name] = req.headers[name];
      const upstream = await fetch(`${origin}${req.url}`, {
        method: req.method,
        headers,
        ...(chunks.length ? { body: Buffer.concat(chunks) } : {}),
      });
      const out: Record<string, string> = {};
      for (const name of ['content-type', 'content-range', 'retry-after', 'x-request-id']) {
        const value = upstream.headers.get(name);
        if (value) out[name] = value;
      }
      if (isVideo) {
        res.writeHead(upstream.status, out);
        res.end(Buffer.from(await upstream.arrayBuffer()));
        return;
      }
      res.writeHead(upstream.status, out);
      res.end((await upstream.text()).replaceAll(origin, base));
    })().catch(() => res.destroy());
  });
  await new Promise<void>((r) => proxy!.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  return {
    baseUrl: `${base}/v1`,
    held: () => held.length,
    open() {
      opened = true;
      for (const release of held.splice(0)) release();
    },
  };
}

const sha256 = async (file: string) =>
  createHash('sha256')
    .update(await readFile(file))
    .digest('hex');

describe('vidbatch download, interrupted', () => {
  it('keeps every video it recorded before Ctrl-C; a second download fetches only the rest', async () => {
    env = await testEnv({ jobSeconds: 0.3, jobJitterSeconds: 0.1 });
    const gate = await videoGate(env.sim.origin, 2);
    await env.startWorker({ baseUrl: gate.baseUrl });
    const tag = randomUUID().slice(0, 8);
    const rows = Array.from({ length: 6 }, (_, i) => `r${i + 1},a lighthouse in fog ${i + 1} ${tag}`);
    await writeFile(join(env.dir, 'd.csv'), ['id,prompt', ...rows].join('\n') + '\n');
    const settings = cliSettings(env);
    const run = await vidbatch(['run', 'd.csv', '--no-download', ...FAST_POLL_FLAGS], {
      cwd: env.dir,
      env: settings,
    });
    expect(run.code, exitAndOutput(run)).toBe(0);
    expect(run.stdout).toContain('6 succeeded, 0 failed of 6');
    const manifest = manifestPathOf(run);
    expect(env.sim.stats().videosServed).toBe(0);

    // One video at a time: two pass, the third is held, and then the user presses Ctrl-C.
    const first = background(['download', 'd.csv', '--concurrency', '1'], { cwd: env.dir, env: settings });
    const recorded = async () => (await readManifest(manifest)).filter((r) => r.file);
    for (let i = 0; gate.held() === 0 || (await recorded()).length < 2; i++) {
      if (i > 600) throw new Error(`the download never reached the third video:\n${first.output()}`);
      await sleep(100);
    }
    const stopped = await first.stop();
    expect(stopped.code, exitAndOutput(stopped)).toBe(130);
    expect(stopped.stdout).toContain('2 videos on disk, verified: 0 already there, 2 fetched');
    expect(stopped.stdout).toContain('4 not fetched (interrupted)');
    expect(stopped.stderr).toContain(
      'Interrupted: every video fetched is recorded in the manifest; `vidbatch download d.csv` fetches the other 4',
    );
    const kept = await recorded();
    expect(kept).toHaveLength(2);
    for (const row of kept) {
      expect(row.downloadedAt).toBeDefined();
      expect(row.verification).toMatchObject({ ok: true });
      expect(await sha256(row.file!)).toBe(row.sha256);
    }
    expect(env.sim.stats().videosServed).toBe(2);

    gate.open();
    const second = await vidbatch(['download', 'd.csv'], { cwd: env.dir, env: settings });
    expect(second.code, exitAndOutput(second)).toBe(0);
    expect(second.stdout).toContain('6 videos on disk, verified: 2 already there, 4 fetched');
    const all = await readManifest(manifest);
    expect(all.filter((r) => r.file)).toHaveLength(6);
    for (const row of all) expect(await sha256(row.file!)).toBe(row.sha256);
    // From the gateway's side: each video was served once, the two kept ones never again.
    const stats = env.sim.stats();
    console.log('download interrupted after 2 of 6, then again:', {
      jobsCreated: stats.jobsCreated,
      videosServed: stats.videosServed,
    });
    expect(stats.jobsCreated).toBe(6);
    expect(stats.videosServed).toBe(6);
  });
});
