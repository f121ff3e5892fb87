// Which task queue a process's batches run on. A process that runs its own worker on a folder's server (or
// with --simulate anywhere) gets a queue of its own gateway, key and output root, so two terminals with
// different gateways never run each other's rows: a --simulate try-out beside a real run cannot send its
// prompts to the paid gateway. Several processes with the same settings share one queue (and one rate
// budget). A deployment (TEMPORAL_ADDRESS, `vidbatch worker`s) keeps the queue it is configured with.
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';

/** What makes two workers interchangeable: the same gateway and key, and the same output root. */
export interface WorkerIdentity {
  /** The gateway base URL, or the simulator's state file for --simulate (stable across runs in one folder). */
  gateway: string;
  /** The API key; only a hash of a hash of it ends up in the queue name. */
  apiKey: string;
  outRoot: string;
}

/** `<base>@<12 hex>`: the base queue (the major version's, or VIDBATCH_TASK_QUEUE) and a hash of the identity. */
export function isolatedQueue(base: string, identity: WorkerIdentity): string {
  const key = createHash('sha256').update(identity.apiKey).digest('hex');
  const digest = createHash('sha256')
    .update([identity.gateway, key, resolve(identity.outRoot)].join('\n'))
    .digest('hex');
  return `${base}@${digest.slice(0, 12)}`;
}

/** The base a queue was derived from (itself when it was not): what tells vidbatch versions apart. */
export function queueBase(queue: string): string {
  const at = queue.lastIndexOf('@');
  return at < 0 ? queue : queue.slice(0, at);
}
