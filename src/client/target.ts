// The target a batch runs for. A process with a worker pays on its own (Session.target); a deployment's starter
// may hold no gateway settings, so its batches run for the target the workers on its task queue declare in
// their identity (contract/target.ts), and `run` says which.
import proto from '@temporalio/proto';
import { environmentTarget, loadProvider, simulatorTarget } from '../config';
import { declaredTarget } from '../contract/target';
import { ConfigError } from '../errors';
import { openSession, type Session } from './session';

/** The identities of the workers that polled `taskQueue` lately (the server keeps the last few minutes'). */
export async function pollersOf(session: Session, taskQueue: string): Promise<string[]> {
  const { pollers } = await session.client.workflowService.describeTaskQueue({
    namespace: session.namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  return (pollers ?? []).map((p) => p.identity ?? '');
}

export interface BatchTarget {
  target: string;
  /** Where it came from, for `run` to say: this process's worker, the queue's workers, or GATEWAY_BASE_URL. */
  from: 'worker' | 'declared' | 'environment';
}

/**
 * The target `plan` (or `run --dry-run`) plans for: `--simulate`'s, else this environment's gateway (as `run`
 * would pay on), else in a deployment (TEMPORAL_ADDRESS) the one its workers declare; undefined when none is
 * known here (the plan then counts every row as new).
 */
export async function plannedTarget(
  simulate: boolean,
  stateFile: string,
  env = process.env,
): Promise<string | undefined> {
  if (simulate) return simulatorTarget(stateFile, loadProvider(env).name);
  const own = environmentTarget(env);
  if (own || !env.TEMPORAL_ADDRESS) return own;
  const session = await openSession({ worker: false });
  try {
    return (await batchTarget(session, env)).target;
  } catch (err) {
    if (err instanceof ConfigError) return undefined; // no worker declares one yet
    throw err;
  } finally {
    await session.close();
  }
}

/** The target `session`'s batches run for (see the file comment). */
export async function batchTarget(
  session: Session,
  env: NodeJS.ProcessEnv = process.env,
): Promise<BatchTarget> {
  if (session.target) return { target: session.target, from: 'worker' };
  const declared = new Set(
    (await pollersOf(session, session.taskQueue)).map(declaredTarget).filter((t) => t !== undefined),
  );
  if (declared.size > 1)
    throw new ConfigError(
      `the workers on task queue "${session.taskQueue}" pay on different targets (${[...declared].join(', ')}): ` +
        'give each gateway account a task queue of its own (VIDBATCH_TASK_QUEUE)',
    );
  const [only] = declared;
  if (only) return { target: only, from: 'declared' };
  // No worker yet (a starter run before the workers): this process's own gateway setting, when it has one.
  const own = environmentTarget(env);
  if (own) return { target: own, from: 'environment' };
  throw new ConfigError(
    `no worker polls task queue "${session.taskQueue}", so no gateway target is declared: start \`vidbatch worker\` ` +
      '(it declares the gateway account it pays on), or set GATEWAY_BASE_URL (and GATEWAY_ACCOUNT, if one URL ' +
      'serves several accounts) where `run` runs',
  );
}
