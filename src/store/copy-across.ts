// Copies one file or object (a video another batch kept) to where a batch keeps its own: between two paths (a
// hard link where it can, else a copy), two keys of one store (a server-side copy, metadata included), or a
// path and a store (streamed). The target is written whole or not at all.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { LocalStore } from './local-store';
import type { ObjectStore, UploadOptions } from './object-store';
import { objectAt } from './open-store';
import { isStoreUrl } from './store-url';

async function locate(place: string): Promise<{ store: ObjectStore; key: string }> {
  return isStoreUrl(place)
    ? objectAt(place)
    : { store: new LocalStore(dirname(place)), key: basename(place) };
}

/** The size of the file or object at `place`; undefined when there is none. */
export async function sizeAt(place: string): Promise<number | undefined> {
  if (!isStoreUrl(place)) return (await stat(place).catch(() => undefined))?.size;
  const { store, key } = await objectAt(place);
  return (await store.head(key))?.size;
}

/** Copies `from` to `to` (replacing it); false when there is nothing at `from`. */
export async function copyAcross(from: string, to: string, options: UploadOptions = {}): Promise<boolean> {
  if (!isStoreUrl(from) && !isStoreUrl(to)) {
    // Two folders: a link shares the bytes, so the other batch's file may be deleted and this one stays.
    const here = new LocalStore('/');
    return here.copy(here.keyOf(from)!, here.keyOf(to)!);
  }
  const source = await locate(from);
  const target = await locate(to);
  if (source.store === target.store) return source.store.copy(source.key, target.key);
  const chunks = isStoreUrl(from)
    ? await source.store.stream(source.key)
    : await stat(from).then(
        () => createReadStream(from),
        () => undefined,
      );
  if (!chunks) return false;
  await target.store.upload(target.key, chunks, options);
  return true;
}
