// The task queue of this major version. Imported by workflow code: no Node built-ins.

/**
 * Versioned by major version: a batch of another version (0.x ran on `vidbatch`) is never picked up by this
 * version's workers, and `run`/`status` tell it apart by its task queue (client/batches.ts checkSameVersion).
 */
export const DEFAULT_TASK_QUEUE = 'vidbatch-1';
