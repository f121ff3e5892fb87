// The worker's activities, built by a factory that receives their dependencies (the gateway client, the output
// root), so the worker and the tests wire them the same way. The workflows import only the type.
import type { GatewayClient } from '../gateway/client';
import type { ObjectStore } from '../store/object-store';
import { createEnhanceActivities } from './enhance';
import { createJobActivities } from './jobs';
import { createNoticeActivities } from './notices';
import { createOutputActivities } from './outputs';
import type { PathRoots } from './paths';
import { createPromptActivities } from './prompts';
import { createRateBudgetActivities } from './rate-budget';
import { createRowActivities } from './rows';
import { createStopActivities } from './stop-job';

export interface ActivityDeps {
  gateway: GatewayClient;
  /** Root under which each batch gets `<outRoot>/<batchId>/`. */
  outRoot: string;
  /** Where activities may read CSVs and write results and videos; undefined: anywhere (tests, embedding). */
  roots?: PathRoots;
  /** The shared object store (VIDBATCH_STORE) where batches started with one keep their CSV and rows. */
  store?: ObjectStore;
  /** The webhook secret notices are signed with (notices/deliver.ts loadNoticeSecret); undefined: none. */
  noticeSecret?: string;
}

/** readRows, enhancePrompt, submitJob, checkJob, pollJob, stopJob, downloadVideo, recordResults, endedPrompts. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createRowActivities(deps.outRoot, deps.roots, deps.store, deps.gateway.provider),
    ...createJobActivities(deps.gateway, deps.outRoot, deps.roots),
    ...createStopActivities(deps.gateway),
    ...createEnhanceActivities(deps.gateway, deps.outRoot, deps.roots),
    ...createOutputActivities(deps.outRoot, deps.roots, () => deps.gateway.videoAuth()),
    ...createRateBudgetActivities(),
    ...createPromptActivities(),
    ...createNoticeActivities(deps.noticeSecret, deps.outRoot, deps.roots),
  };
}

export type Activities = ReturnType<typeof createActivities>;
