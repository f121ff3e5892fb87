// The object store as a folder: a key is a path under it. Writes go to a temporary file first and are then
// renamed (or, for `ifAbsent`, hard-linked, which fails when the name exists), so a reader never sees part of
// an object and a crashed writer leaves at most a `.tmp` file.
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { copyFile, link, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { checkKey, type ObjectStore, type PutOptions, type StoredObject } from './object-store';

const isMissing = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

export class LocalStore implements ObjectStore {
  readonly url: string;

  constructor(root: string) {
    this.url = resolve(root);
  }

  urlOf(key: string): string {
    return join(this.url, checkKey(key));
  }

  keyOf(url: string): string | undefined {
    const rel = relative(this.url, resolve(url));
    if (!rel || rel.startsWith(`..${sep}`) || rel === '..' || isAbsolute(rel)) return undefined;
    return rel.split(sep).join('/');
  }

  async head(key: string): Promise<StoredObject | undefined> {
    const file = await stat(this.urlOf(key)).catch((err: unknown) => {
      if (isMissing(err)) return undefined;
      throw err;
    });
    if (!file?.isFile()) return undefined;
    return { size: file.size, etag: `${file.size}-${file.mtimeMs}-${file.ino}` };
  }

  async read(key: string, start: number, length: number): Promise<Buffer | undefined> {
    const handle = await open(this.urlOf(key), 'r').catch((err: unknown) => {
      if (isMissing(err)) return undefined;
      throw err;
    });
    if (!handle) return undefined;
    try {
      const buffer = Buffer.alloc(length);
      let filled = 0;
      while (filled < length) {
        const { bytesRead } = await handle.read(buffer, filled, length - filled, start + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return buffer.subarray(0, filled);
    } finally {
      await handle.close();
    }
  }

  async stream(
    key: string,
    range?: { start: number; end: number },
  ): Promise<AsyncIterable<Uint8Array> | undefined> {
    const handle = await open(this.urlOf(key), 'r').catch((err: unknown) => {
      if (isMissing(err)) return undefined;
      throw err;
    });
    return handle?.createReadStream({ highWaterMark: 1 << 20, ...range });
  }

  async put(key: string, body: Buffer | string, options: PutOptions = {}): Promise<boolean> {
    return this.write(
      key,
      Readable.from([body]),
      options.ifAbsent ?? false,
      options.secret ? 0o600 : undefined,
    );
  }

  async upload(
    key: string,
    body: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>,
  ): Promise<void> {
    await this.write(key, Readable.from(body), false);
  }

  private async write(key: string, body: Readable, ifAbsent: boolean, mode?: number): Promise<boolean> {
    const path = this.urlOf(key);
    await mkdir(dirname(path), { recursive: true });
    const tmp = `${path}.${randomUUID()}.tmp`;
    try {
      await pipeline(body, createWriteStream(tmp, mode === undefined ? {} : { mode }));
      if (!ifAbsent) {
        await rename(tmp, path);
        return true;
      }
      return await link(tmp, path).then(
        () => true,
        (err: NodeJS.ErrnoException) => {
          if (err.code === 'EEXIST') return false;
          throw err;
        },
      );
    } finally {
      await rm(tmp, { force: true });
    }
  }

  async *list(prefix: string, startAfter = ''): AsyncIterable<{ key: string; size: number }> {
    // The folder the prefix's last whole part names; the rest of the prefix filters its files.
    const cut = prefix.lastIndexOf('/');
    const dir = cut === -1 ? '' : prefix.slice(0, cut);
    const base = dir ? join(this.url, checkKey(dir)) : this.url;
    const entries = await readdir(base, { recursive: true, withFileTypes: true }).catch((err: unknown) => {
      if (isMissing(err)) return [];
      throw err;
    });
    const keys = entries
      .filter((e) => e.isFile() && !e.name.endsWith('.tmp'))
      .map((e) => relative(this.url, join(e.parentPath, e.name)).split(sep).join('/'))
      .filter((key) => key.startsWith(prefix) && key > startAfter)
      .sort();
    for (const key of keys) {
      const file = await stat(join(this.url, key)).catch(() => undefined);
      if (file) yield { key, size: file.size };
    }
  }

  async *folders(prefix: string): AsyncIterable<string> {
    const dir = prefix ? join(this.url, checkKey(prefix.replace(/\/$/, ''))) : this.url;
    const entries = await readdir(dir, { withFileTypes: true }).catch((err: unknown) => {
      if (isMissing(err)) return [];
      throw err;
    });
    for (const e of entries.filter((e) => e.isDirectory()).sort((a, b) => (a.name < b.name ? -1 : 1)))
      yield e.name;
  }

  async copy(from: string, to: string): Promise<boolean> {
    const source = this.urlOf(from);
    const path = this.urlOf(to);
    if (!(await this.head(from))) return false;
    await mkdir(dirname(path), { recursive: true });
    const tmp = `${path}.${randomUUID()}.tmp`;
    try {
      // A hard link shares the bytes (both names keep them); across file systems, a copy.
      await link(source, tmp).catch(() => copyFile(source, tmp));
      await rename(tmp, path);
      return true;
    } finally {
      await rm(tmp, { force: true });
    }
  }

  async delete(key: string): Promise<void> {
    await rm(this.urlOf(key), { force: true });
  }
}
