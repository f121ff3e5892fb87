// The starter: start the batch of a CSV, or attach to the one already started from it, then follow it until
// it ends. `vidbatch run` and `vidbatch retry-failed` are this; worker.ts is the other side.
import { followBatch, type StartedBatch } from './client/batches';
import type { BatchResult } from './contract/batch';
import type { BatchProgress } from './contract/progress';

export interface FollowOptions {
  /** Start (or find) the batch and return without following it. */
  detach?: boolean;
  /** Called once the batch is started or attached to, before following it. */
  onStarted?: (started: StartedBatch) => void;
  onProgress?: (p: BatchProgress) => void;
  /** Stops following; the batch goes on. */
  signal?: AbortSignal;
}

/**
 * Starts or attaches to a batch with `start` (`run`: startBatch of its CSV; `retry-failed`: retryFailed); then,
 * unless detached, follows it. `started` is undefined when there was nothing to start; `result` is the batch's
 * result, or undefined when detached or when following stopped before it ended.
 */
export async function startAndFollow(
  start: () => Promise<StartedBatch | undefined>,
  follow: FollowOptions = {},
): Promise<{ started: StartedBatch | undefined; result: BatchResult | undefined }> {
  const started = await start();
  if (!started) return { started, result: undefined };
  follow.onStarted?.(started);
  if (follow.detach) return { started, result: undefined };
  const result = await followBatch(started.handle, follow.onProgress ?? ((p) => void p), follow.signal);
  return { started, result };
}
