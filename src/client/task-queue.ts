// Which task queue a process's batches run on. A process that runs its own worker on a folder's server (or
// with --simulate anywhere) gets a queue of its own target and output root, so two terminals paying on
// different accounts never run each other's rows: a --simulate try-out beside a real run cannot send its
// prompts to the paid gateway. Several processes with the same target and root share one queue (and one rate
// budget). The key is not part of it: a key is a credential that rotates, and a batch started with a key
// that was since revoked is served by the next process with a new key. A deployment (TEMPORAL_ADDRESS,
// `vidbatch worker`s) keeps the queue it is configured with.
import { createHash } from 'node:crypto';
import { isStoreUrl } from '../store/store-url';
import { resolve } from 'node:path';

/** What makes two workers interchangeable: the same target (config.ts gatewayTarget) and output root. */
export interface BatchScope {
  target: string;
  /** A local folder (resolved here) or the shared store's URL. */
  root: string;
}

/** The root as it is keyed: a folder's absolute path, or the store's URL as given. */
export const scopeRoot = (root: string) => (isStoreUrl(root) ? root.replace(/\/+$/, '') : resolve(root));

/** Hex digest of a scope: the same target and root always give the same one. */
export function scopeDigest(scope: BatchScope, length: number): string {
  return createHash('sha256')
    .update([scope.target, scopeRoot(scope.root)].join('\n'))
    .digest('hex')
    .slice(0, length);
}

/** `<base>@<12 hex>`: the base queue (the major version's, or VIDBATCH_TASK_QUEUE) and a hash of the scope. */
export function isolatedQueue(base: string, scope: BatchScope): string {
  return `${base}@${scopeDigest(scope, 12)}`;
}

/** The base a queue was derived from (itself when it was not): what tells vidbatch versions apart. */
export function queueBase(queue: string): string {
  const at = queue.lastIndexOf('@');
  return at < 0 ? queue : queue.slice(0, at);
}
