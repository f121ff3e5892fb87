// Worker Versioning (Temporal Worker Deployments) of a `vidbatch worker`: both of its Workers, the main one and
// the gateway queue's, declare the same Deployment Version, so a workflow pinned to a build has its workflow
// tasks and its activities dispatched to that build's workers only. Which workflow types are pinned is
// declared with the workflows (workflows/index.ts); docs/upgrading.md says why.
import type { NativeConnection, WorkerDeploymentOptions } from '@temporalio/worker';
import type { WorkerVersion } from '../config';

/** The Workers' `workerDeploymentOptions` for `version`. */
export function deploymentOptions(version: WorkerVersion): WorkerDeploymentOptions {
  return {
    version,
    useWorkerVersioning: true,
    // The batch's and the learner's: they move to the current build. Prompts and notices declare PINNED
    // themselves (workflows/index.ts).
    defaultVersioningBehavior: 'AUTO_UPGRADE',
  };
}

/** How long `--make-current` tries: the server knows a version only once it has seen both queues polled. */
export const MAKE_CURRENT_TIMEOUT_MS = 60_000;
const MAKE_CURRENT_RETRY_MS = 1_000;

/**
 * Makes `version` the current version of its deployment: new workflows, and auto-upgrading ones at their next
 * workflow task, go to its workers. Retried until the server has registered the version (its first polls),
 * for at most `timeoutMs`; resolves to undefined when done, else to the last error's message.
 */
export async function makeCurrent(
  connection: NativeConnection,
  namespace: string,
  version: WorkerVersion,
  identity: string,
  timeoutMs = MAKE_CURRENT_TIMEOUT_MS,
): Promise<string | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await connection.workflowService.setWorkerDeploymentCurrentVersion({
        namespace,
        deploymentName: version.deploymentName,
        buildId: version.buildId,
        identity,
      });
      return undefined;
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      if (Date.now() + MAKE_CURRENT_RETRY_MS > deadline) return reason;
      await new Promise((r) => setTimeout(r, MAKE_CURRENT_RETRY_MS));
    }
  }
}

/** `deployment:build`, as Temporal writes a version (search attribute TemporalWorkerDeploymentVersion). */
export const versionName = (v: WorkerVersion) => `${v.deploymentName}:${v.buildId}`;
