// The target: the account money is spent on (config.ts gatewayTarget), which names batches, task queues and
// the requests claimed before they are paid. Shared by the client and the workers: imports nothing.

/** A worker's Temporal identity: `<pid>@<host> target=<target>`, so a starter can read which target it pays on. */
export function workerIdentity(target: string, base: string): string {
  return `${base} target=${target}`;
}

/** The target a poller's identity declares (workerIdentity), if any. */
export function declaredTarget(identity: string | null | undefined): string | undefined {
  const at = identity?.indexOf(' target=') ?? -1;
  return at < 0 ? undefined : identity!.slice(at + ' target='.length);
}

/** `batch-<16 hex of the CSV's sha256>-<8 hex of its scope>`: a batch is its file, its target and its root. */
export const BATCH_ID = /^batch-[0-9a-f]{16}-[0-9a-f]{8}$/;

/** The scope part of a batch id (its target and root), or undefined for a name that is not a batch id. */
export function scopeOfBatch(batchId: string): string | undefined {
  return BATCH_ID.test(batchId) ? batchId.slice(-8) : undefined;
}
