// The store a process uses: the bucket VIDBATCH_STORE names, else the output root's folder. A bucket is opened
// once per process (one client, one pool of connections), and a URL into it finds it again: the results
// modules get `s3://` paths from workflow input and read or write them through the store that holds them.
import { loadStoreSetting } from '../config';
import { PathNotAllowedError } from '../errors';
import type { ObjectStore } from './object-store';
import { LocalStore } from './local-store';

const opened = new Map<string, Promise<ObjectStore>>();

/**
 * `setting` (VIDBATCH_STORE, checked by config.ts) names a bucket: an S3Store, loaded only then, so the AWS SDK
 * costs nothing to those who keep the local default. Without it, the folder `localRoot`.
 */
export async function openStore(setting: string | undefined, localRoot: string): Promise<ObjectStore> {
  if (!setting) return new LocalStore(localRoot);
  let store = opened.get(setting);
  if (!store) {
    store = import('./s3-store').then(({ S3Store }) => new S3Store(setting));
    opened.set(setting, store);
  }
  return store;
}

/**
 * The store holding `url` and its key there (`''` for the store's own URL): a store this process opened, else
 * this process's VIDBATCH_STORE.
 * Throws PathNotAllowedError when neither holds it.
 */
export async function objectAt(url: string): Promise<{ store: ObjectStore; key: string }> {
  const setting = loadStoreSetting();
  if (setting) await openStore(setting, '');
  for (const pending of opened.values()) {
    const store = await pending;
    const key = store.keyOf(url);
    if (key !== undefined) return { store, key };
    // The store itself (its folders are listed from key '').
    if (store.url === url.replace(/\/+$/, '')) return { store, key: '' };
  }
  throw new PathNotAllowedError(url, [...opened.keys()], 'VIDBATCH_STORE');
}
