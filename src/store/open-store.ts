// The store a process uses: the bucket VIDBATCH_STORE names, else the output root's folder.
import type { ObjectStore } from './object-store';
import { LocalStore } from './local-store';

/**
 * `setting` (VIDBATCH_STORE, checked by config.ts) names a bucket: an S3Store, loaded only then, so the AWS SDK
 * costs nothing to those who keep the local default. Without it, the folder `localRoot`.
 */
export async function openStore(setting: string | undefined, localRoot: string): Promise<ObjectStore> {
  if (!setting) return new LocalStore(localRoot);
  const { S3Store } = await import('./s3-store');
  return new S3Store(setting);
}

/** True for a reference into a shared store (an `s3://` URL) rather than a path on this machine. */
export const isStoreUrl = (path: string) => path.startsWith('s3://');
