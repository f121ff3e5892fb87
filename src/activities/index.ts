// The worker's activities, built by a factory that receives their dependencies (the gateway client, the output
// root), so the worker and the tests wire them the same way. The workflows import only the type.
import type { GatewayClient } from '../gateway/client';
import { createJobActivities } from './jobs';
import { createOutputActivities } from './outputs';
import { createRateBudgetActivities } from './rate-budget';
import { createRowActivities } from './rows';

export interface ActivityDeps {
  gateway: GatewayClient;
  /** Root under which each batch gets `<outRoot>/<batchId>/`. */
  outRoot: string;
}

/** readRows, submitJob, pollJob, downloadVideo, recordResults. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createRowActivities(),
    ...createJobActivities(deps.gateway),
    ...createOutputActivities(deps.outRoot),
    ...createRateBudgetActivities(),
  };
}

export type Activities = ReturnType<typeof createActivities>;
