// A batch's CSV in the shared store: put once under its content's sha256 (`inputs/<sha256>.csv`, immutable),
// so the batch names it by URL and workers on any machine read it from there.
import { createReadStream } from 'node:fs';
import { csvHash } from '../input/csv';
import type { ObjectStore } from './object-store';

export const inputKey = (csvSha256: string) => `inputs/${csvSha256}.csv`;

/**
 * Puts the CSV at `path`, validated with sha256 `csvSha256`, in the store unless it is there; returns its URL.
 * Throws when the file changed since it was validated (what was put is taken back).
 */
export async function putInput(store: ObjectStore, path: string, csvSha256: string): Promise<string> {
  const key = inputKey(csvSha256);
  if (!(await store.head(key))) {
    const hash = csvHash();
    async function* hashed() {
      for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
        hash.update(chunk);
        yield chunk;
      }
    }
    await store.upload(key, hashed(), { contentType: 'text/csv' });
    if (hash.digest() !== csvSha256) {
      await store.delete(key);
      throw new Error(`${path} changed while it was being put in ${store.url}: run it again`);
    }
  }
  return store.urlOf(key);
}
