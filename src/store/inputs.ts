// A batch's CSV in the shared store: put once under its content's sha256 (`inputs/<sha256>.csv`, immutable),
// so the batch names it by URL and workers on any machine read it from there.
import { createReadStream } from 'node:fs';
import { parseS3Url } from '../config';
import { ConfigError } from '../errors';
import { csvHash, loadCsvFrom, type CsvOptions } from '../input/csv';
import type { ObjectStore } from './object-store';
import { openStore } from './open-store';
import { isStoreUrl } from './store-url';

export const inputKey = (csvSha256: string) => `inputs/${csvSha256}.csv`;

/** Where a CSV is read from: a file, or an object (`run s3://bucket/key.csv`). */
export type CsvSource = string | { store: ObjectStore; key: string; url: string };

/**
 * The CSV an `s3://bucket/key` URL names, read with the shared store's credentials (VIDBATCH_STORE must be
 * set: it is where the batch's copy goes). Throws ConfigError naming the URL when it cannot be read.
 */
export async function openCsvUrl(
  url: string,
  storeSetting: string | undefined,
  /** How its rows are read (the provider they are for). */
  options: CsvOptions = {},
) {
  if (!storeSetting)
    throw new ConfigError(
      `${url}: a CSV in a bucket needs VIDBATCH_STORE (the store workers read batches' CSVs from) to be set`,
    );
  const { bucket, prefix } = parseS3Url(url);
  const key = prefix.replace(/\/$/, '');
  if (!key) throw new ConfigError(`${url} names a bucket, not a CSV in it (s3://<bucket>/<key>)`);
  const store = await openStore(`s3://${bucket}`, '');
  const chunks = await store.stream(key);
  if (!chunks) throw new ConfigError(`${url}: no such object`);
  return { source: { store, key, url }, csv: await loadCsvFrom(chunks, url, options) };
}

/** The name a source goes by in messages and the batch's memo: the absolute path, or the URL. */
export function sourceName(source: CsvSource, resolve: (path: string) => string): string {
  return typeof source === 'string' ? (isStoreUrl(source) ? source : resolve(source)) : source.url;
}

/**
 * Puts the CSV `source`, validated with sha256 `csvSha256`, in the store unless it is there; returns its URL.
 * Throws when its content changed since it was validated (what was put is taken back).
 */
export async function putInput(store: ObjectStore, source: CsvSource, csvSha256: string): Promise<string> {
  const key = inputKey(csvSha256);
  if (!(await store.head(key))) {
    const from =
      typeof source === 'string'
        ? (createReadStream(source, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>)
        : await source.store.stream(source.key);
    const name = typeof source === 'string' ? source : source.url;
    if (!from) throw new Error(`${name} is gone: run it again`);
    const hash = csvHash();
    async function* hashed() {
      for await (const chunk of from!) {
        const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
        hash.update(bytes);
        yield bytes;
      }
    }
    await store.upload(key, hashed(), { contentType: 'text/csv' });
    if (hash.digest() !== csvSha256) {
      await store.delete(key);
      throw new Error(`${name} changed while it was being put in ${store.url}: run it again`);
    }
  }
  return store.urlOf(key);
}
