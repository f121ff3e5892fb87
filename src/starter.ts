// The starter: start the batch of a CSV, or attach to the one already started from it, then follow it until
// it ends. `vidbatch run` and `vidbatch retry-failed` are this; worker.ts is the other side.
import { followBatch, startBatch, type StartBatchOptions, type StartedBatch } from './client/batches';
import type { Session } from './client/session';
import type { BatchProgress, BatchResult } from './contract/types';
import type { ParsedCsv } from './input/csv';

export interface FollowOptions {
  /** The CSV already parsed and validated by the caller, so it is not read twice. */
  parsed?: ParsedCsv;
  /** Start (or find) the batch and return without following it. */
  detach?: boolean;
  /** Called once the batch is started or attached to, before following it. */
  onStarted?: (started: StartedBatch) => void;
  onProgress?: (p: BatchProgress) => void;
  /** Stops following; the batch goes on. */
  signal?: AbortSignal;
}

/**
 * Starts or attaches to the batch of `csvPath`; then, unless detached, follows it. `result` is the batch's
 * result, or undefined when detached or when following stopped before it ended.
 */
export async function startAndFollow(
  session: Session,
  csvPath: string,
  options: StartBatchOptions,
  follow: FollowOptions = {},
): Promise<{ started: StartedBatch; result: BatchResult | undefined }> {
  const started = await startBatch(session, csvPath, options, follow.parsed);
  follow.onStarted?.(started);
  if (follow.detach) return { started, result: undefined };
  const result = await followBatch(started.handle, follow.onProgress ?? ((p) => void p), follow.signal);
  return { started, result };
}
