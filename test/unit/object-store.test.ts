// The store contract: the same cases against the local folder store and the S3 store on a real S3-compatible
// server (versitygw), so that what vidbatch relies on holds for both.
import { mkdtemp, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalStore } from '../../src/store/local-store';
import { LOG_LOOKBACK_MS, ObjectLog, ObjectLogTail } from '../../src/store/object-log';
import type { ObjectStore } from '../../src/store/object-store';
import { parseS3Url } from '../../src/config';
import { S3Store } from '../../src/store/s3-store';
import { requireVersitygw, startS3Server, type S3Server } from '../s3-server';

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

async function text(chunks: AsyncIterable<Uint8Array> | undefined): Promise<string | undefined> {
  if (!chunks) return undefined;
  const parts: Buffer[] = [];
  for await (const c of chunks) parts.push(Buffer.from(c));
  return Buffer.concat(parts).toString('utf8');
}

function contract(name: string, open: () => Promise<{ store: ObjectStore; restart?: () => Promise<void> }>) {
  describe(`${name} store`, () => {
    let store: ObjectStore;
    let restart: (() => Promise<void>) | undefined;
    beforeAll(async () => {
      ({ store, restart } = await open());
    }, 60_000);

    it('writes whole objects and reads them back, whole, by range, and as a stream', async () => {
      expect(await store.put('a/one.txt', 'hello, object')).toBe(true);
      expect(await store.head('a/one.txt')).toMatchObject({ size: 13 });
      expect((await store.read('a/one.txt', 7, 6))!.toString()).toBe('object');
      // A range running past the end gives what there is; one starting at or after the end gives nothing.
      expect((await store.read('a/one.txt', 10, 100))!.toString()).toBe('ect');
      expect((await store.read('a/one.txt', 13, 5))!.length).toBe(0);
      expect(await text(await store.stream('a/one.txt'))).toBe('hello, object');
      expect(await text(await store.stream('a/one.txt', { start: 7, end: 9 }))).toBe('obj');
      // A store that can hand out a link to an object: the link gets its bytes, and nothing else.
      if (store.presign) {
        const link = await store.presign('a/one.txt', 60);
        expect(await (await fetch(link)).text()).toBe('hello, object');
        expect((await fetch(link.replace('one.txt', 'two.txt'))).status).toBe(403);
      }
      // Written again: the new bytes, whole, and a new etag.
      const before = await store.head('a/one.txt');
      expect(await store.put('a/one.txt', 'replaced')).toBe(true);
      expect((await store.read('a/one.txt', 0, 100))!.toString()).toBe('replaced');
      expect((await store.head('a/one.txt'))!.etag).not.toBe(before!.etag);
    });

    it('says "none" for a key with no object, never an error', async () => {
      expect(await store.head('nothing/here')).toBeUndefined();
      expect(await store.read('nothing/here', 0, 10)).toBeUndefined();
      expect(await store.stream('nothing/here')).toBeUndefined();
      await store.delete('nothing/here');
    });

    it('writes if absent only once: the first writer wins, the object keeps its bytes', async () => {
      expect(await store.put('cas/x', 'first', { ifAbsent: true })).toBe(true);
      expect(await store.put('cas/x', 'second', { ifAbsent: true })).toBe(false);
      expect((await store.read('cas/x', 0, 100))!.toString()).toBe('first');
      const racers = await Promise.all(
        Array.from({ length: 8 }, (_, i) => store.put('cas/race', `writer ${i}`, { ifAbsent: true })),
      );
      expect(racers.filter(Boolean)).toHaveLength(1);
    });

    it('uploads from chunks, large ones in parts, and lists keys by prefix in order', async () => {
      // 12 MiB in 1 MiB chunks: more than one 5 MiB part on S3.
      const chunk = Buffer.alloc(1 << 20, 'v');
      await store.upload(
        'big/video.bin',
        (function* () {
          for (let i = 0; i < 12; i++) yield chunk;
        })(),
      );
      expect((await store.head('big/video.bin'))!.size).toBe(12 << 20);
      expect((await store.read('big/video.bin', (12 << 20) - 3, 10))!.toString()).toBe('vvv');
      for (const k of ['list/b', 'list/a', 'list/c/d', 'listx']) await store.put(k, k);
      expect((await collect(store.list('list/'))).map((o) => o.key)).toEqual([
        'list/a',
        'list/b',
        'list/c/d',
      ]);
      expect(await collect(store.list('list/c'))).toEqual([{ key: 'list/c/d', size: 8 }]);
      expect(await collect(store.list('none/'))).toEqual([]);
      await store.delete('list/a');
      expect((await collect(store.list('list/'))).map((o) => o.key)).toEqual(['list/b', 'list/c/d']);
    });

    it('refuses keys that could leave the store or alias another key', async () => {
      for (const key of ['', '/abs', 'a/../b', 'a//b', './a', 'a/', 'a\\b'])
        await expect(store.put(key, 'x'), key).rejects.toThrow(/not a valid object key/);
      expect(store.keyOf(store.urlOf('inputs/abc.csv'))).toBe('inputs/abc.csv');
    });

    it('lists the folders under a prefix once each, and copies an object inside the store', async () => {
      for (const k of ['fold/b/1', 'fold/b/2', 'fold/a/x/1', 'fold/top', 'folded/c/1']) await store.put(k, k);
      expect(await collect(store.folders('fold/'))).toEqual(['a', 'b']);
      expect(await collect(store.folders('fold/a/'))).toEqual(['x']);
      expect(await collect(store.folders('nowhere/'))).toEqual([]);
      expect(await collect(store.folders(''))).toContain('fold');
      expect(await store.copy('fold/b/1', 'fold/c/copy')).toBe(true);
      expect(await text(await store.stream('fold/c/copy'))).toBe('fold/b/1');
      // Copied again over itself or another object: the source's bytes, whole.
      expect(await store.copy('fold/top', 'fold/c/copy')).toBe(true);
      expect(await text(await store.stream('fold/c/copy'))).toBe('fold/top');
      expect(await store.copy('fold/none', 'fold/c/never')).toBe(false);
      expect(await store.head('fold/c/never')).toBeUndefined();
    });

    it('lists from a key on, as an incremental reader does', async () => {
      for (const k of ['from/1', 'from/2', 'from/3']) await store.put(k, k);
      expect((await collect(store.list('from/', 'from/1'))).map((o) => o.key)).toEqual(['from/2', 'from/3']);
    });

    it('holds a log: a retried write is one object, records come back in key order, a tail reads each once', async () => {
      const log = new ObjectLog<{ row: string; n: number }>(store, 'log/');
      const t = 1_780_000_000_000;
      expect(await log.append([{ row: 'a', n: 1 }], t)).toBe(true);
      expect(await log.append([{ row: 'a', n: 1 }], t)).toBe(false); // the same group, retried
      expect(await log.append([], t)).toBe(false);
      // Many writers at once (workers on several machines): nothing lost, nothing doubled.
      await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          log.append(
            [
              { row: `w${i}`, n: i },
              { row: 'a', n: 10 + i },
            ],
            t + 1 + i,
          ),
        ),
      );
      expect((await collect(store.list('log/'))).length).toBe(9);
      const all: { row: string; n: number }[] = [];
      await log.readAll((r) => all.push(r));
      expect(all.map((r) => r.n)).toEqual([1, 0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15, 6, 16, 7, 17]);

      const tail = new ObjectLogTail(log);
      const seen: number[] = [];
      expect(await tail.read((r) => seen.push(r.n))).toBe(9);
      expect(await tail.read((r) => seen.push(r.n))).toBe(0);
      // A write stamped before the newest read (a slow clock, a slow put), within the lookback: read once.
      await log.append([{ row: 'late', n: 100 }], t + 2 - 60_000);
      await log.append([{ row: 'next', n: 101 }], t + 20);
      expect(await tail.read((r) => seen.push(r.n))).toBe(2);
      expect(seen.slice(-2)).toEqual([100, 101]);
      // Stamped further back than the lookback: the bound of what a tail reads (a full read still has it).
      await log.append([{ row: 'too-late', n: 102 }], t - LOG_LOOKBACK_MS - 1_000);
      expect(await tail.read((r) => seen.push(r.n))).toBe(0);
      const again: number[] = [];
      await log.readAll((r) => again.push(r.n));
      expect(again[0]).toBe(102);
    });

    it('compacts a log: every reader gets each record once, before, during and after, late writes included', async () => {
      const log = new ObjectLog<{ rowId: string }>(store, 'compact/jobs.jsonl/');
      const t0 = 1_700_000_000_000;
      const write = (from: number, n: number, at = (i: number) => t0 + i) =>
        Promise.all(
          Array.from({ length: n }, (_, k) => log.append([{ rowId: `r${from + k}` }], at(from + k))),
        );
      const rows = async (tail?: ObjectLogTail<{ rowId: string }>) => {
        const got: string[] = [];
        await (tail ?? new ObjectLogTail(log)).read((r) => got.push(r.rowId));
        return got;
      };
      const range = (from: number, n: number) => Array.from({ length: n }, (_, k) => `r${from + k}`);
      await write(0, 120);
      const tail = new ObjectLogTail(log);
      expect(await rows(tail)).toEqual(range(0, 120));
      const later = t0 + 119 + 2 * LOG_LOOKBACK_MS + 1;
      // Not due: too few parts, or none old enough.
      expect(await log.compact(later, 200)).toBe(0);
      expect(await log.compact(t0, 10)).toBe(0);
      expect(await log.compact(later, 100)).toBe(120);
      expect((await log.objects()).map((o) => o.parts)).toEqual([120]);
      expect(await rows()).toEqual(range(0, 120));
      expect(await rows(tail)).toEqual([]);
      // A write landing late, stamped before the compaction's cutoff: read by new readers and by the tail.
      await write(120, 1, () => t0 + 5);
      expect((await rows()).sort()).toEqual(range(0, 121).sort());
      expect(await rows(tail)).toEqual(['r120']);
      // The next compaction waits for half as many new parts as the compacted object holds, then merges them.
      await write(121, 40, (i) => t0 + 1_000 + i);
      expect(await log.compact(later + 2_000, 10)).toBe(0);
      await write(161, 40, (i) => t0 + 1_000 + i);
      expect(await log.compact(later + 2_000, 10)).toBe(81);
      expect((await log.objects()).map((o) => o.parts)).toEqual([201]);
      expect((await rows()).sort()).toEqual(range(0, 201).sort());
      expect(await rows(tail)).toEqual(range(121, 80));
      expect(await rows(tail)).toEqual([]);
      // Parts written again beside the compacted object (as a reader listing between a compaction's upload and
      // its deletes sees them): still each record once, and the next compaction drops them.
      await write(0, 120);
      const twice = await rows();
      expect(twice).toHaveLength(201);
      expect(twice.sort()).toEqual(range(0, 201).sort());
      expect(await log.compact(later + 2_000, 10)).toBe(120);
      expect(await log.objects()).toHaveLength(1);
      expect((await rows()).sort()).toEqual(range(0, 201).sort());
    });

    it('keeps its objects across a restart of the server', async () => {
      if (!restart) return; // the local store has no server
      await store.put('kept/across', 'restart');
      await restart();
      expect((await store.read('kept/across', 0, 100))!.toString()).toBe('restart');
    });
  });
}

contract('local', async () => {
  const root = await mkdtemp(join(tmpdir(), 'vidbatch-store-'));
  return { store: new LocalStore(root) };
});

describe('the local store leaves no temporary files', () => {
  it('after writes that succeed and writes that lose', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vidbatch-store-'));
    const store = new LocalStore(root);
    await store.put('k', 'a', { ifAbsent: true });
    await store.put('k', 'b', { ifAbsent: true });
    await store.put('k', 'c');
    expect(await readdir(root)).toEqual(['k']);
    expect(store.keyOf('/elsewhere/k')).toBeUndefined();
  });
});

describe('s3:// settings', () => {
  it('split into bucket and prefix, and bad ones are refused naming the setting', () => {
    expect(parseS3Url('s3://my-bucket')).toEqual({ bucket: 'my-bucket', prefix: '' });
    expect(parseS3Url('s3://my-bucket/team/a/')).toEqual({
      bucket: 'my-bucket',
      prefix: 'team/a/',
    });
    for (const bad of ['s3://', 's3://ab', 's3://Upper', 'http://x/y', 's3://bucket/a/../b'])
      expect(() => parseS3Url(bad), bad).toThrow(/^VIDBATCH_STORE must be s3:/);
  });
});

const versitygw = requireVersitygw();
if (versitygw) {
  let server: S3Server;
  const stores: S3Store[] = [];
  afterAll(async () => {
    for (const s of stores) s.destroy();
    await server?.stop();
  });
  contract('S3 (versitygw)', async () => {
    server = await startS3Server(versitygw);
    // As a vidbatch process gets them: the AWS SDK reads its settings from the environment.
    Object.assign(process.env, server.env);
    const store = new S3Store(`s3://${server.bucket}/some/prefix`);
    stores.push(store);
    return { store, restart: () => server.restart() };
  });
}
