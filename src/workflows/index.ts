// The workflow bundle's entry point: every workflow type the worker registers, and their Worker Versioning
// behaviour (docs/upgrading.md#worker-versioning). A prompt or a notice lives minutes to hours, so on a
// versioned `vidbatch worker` it stays on the build that started it: a change to it needs no patch, and its
// history never replays on other code. The batch and the rate-budget learner live for hours or for ever
// (continuing as new), so pinning them would keep the old build's workers running until they end: they take
// the versioned worker's default, AUTO_UPGRADE (worker/versioning.ts), and move to the current build at their
// next workflow task; a change to them ships behind patched().
import type { WorkflowDefinitionOptions } from '@temporalio/common';
import { setWorkflowOptions, workflowInfo } from '@temporalio/workflow';
import { noticeWorkflow } from './notice';
import { promptWorkflow } from './prompt';

/**
 * PINNED when the build that ran the workflow's first task was versioned. The server refuses any behaviour from
 * an unversioned worker, and a pinned workflow only ever runs on its own build, so one that started unversioned
 * declares none wherever it replays.
 */
const pinnedWhenVersioned = (): WorkflowDefinitionOptions =>
  workflowInfo().currentDeploymentVersion?.deploymentName ? { versioningBehavior: 'PINNED' } : {};
setWorkflowOptions(pinnedWhenVersioned, promptWorkflow);
setWorkflowOptions(pinnedWhenVersioned, noticeWorkflow);

export { batchWorkflow } from './batch';
export { rateBudgetWorkflow } from './rate-budget';
export { promptWorkflow, noticeWorkflow };
