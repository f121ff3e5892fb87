// The vidbatch worker: runs batch and prompt workflows and the gateway activities. `createWorker` is used by
// `vidbatch worker`, by `vidbatch run` (in-process worker) and by the tests.
import { fileURLToPath } from 'node:url';
import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { createActivities } from './activities';
import { loadGatewaySettings, loadTemporalSettings, type GatewaySettings } from './config';
import { ConfigError } from './errors';
import { GatewayClient } from './gateway/client';
import { loadGatewayRps, withGatewayWorker } from './worker/gateway-worker';
import { announce } from './worker/runtime';
import { cachedWorkflowBundle } from './worker/workflow-bundle';

export const WORKFLOWS_PATH = fileURLToPath(new URL('./workflows/index.ts', import.meta.url));

export interface CreateWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  gateway: GatewaySettings;
  /** Root of the per-batch output folders; default `./out`. */
  outRoot?: string;
  /** A prebuilt bundle (tests build one per run); default: the cached bundle of `src/workflows`. */
  workflowBundle?: WorkflowBundle;
  maxConcurrentActivities?: number;
  /** Pin the gateway queue's rate limit (requests/second); default: learned (docs/rate-budget.md). */
  gatewayRps?: number;
}

export async function createWorker(options: CreateWorkerOptions): Promise<Worker> {
  const gateway = new GatewayClient(options.gateway);
  const workflowBundle =
    options.workflowBundle ??
    (await cachedWorkflowBundle(WORKFLOWS_PATH).catch((err: unknown) => {
      // Still works, at the cost of bundling in this process.
      announce(`could not use a cached workflow bundle (${String(err)}); bundling in the worker`, {});
      return undefined;
    }));
  const activities = createActivities({ gateway, outRoot: options.outRoot ?? 'out' });
  const worker = await Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    ...(workflowBundle ? { workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    activities,
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivities ?? 200,
    // Explicit, because the SDK's default follows the heap limit: a worker run with a small
    // --max-old-space-size would otherwise cache 10 workflows and replay the rest on every task.
    maxCachedWorkflows: 600,
  });
  // Gateway calls run on their own, rate-limited queue, polled by a second Worker (docs/rate-budget.md).
  return withGatewayWorker(worker, { ...options, gateway, activities });
}

/** `vidbatch worker`: connects with Temporal's environment configuration and runs until SIGINT/SIGTERM. */
export async function runWorker(env: NodeJS.ProcessEnv = process.env, outRoot?: string): Promise<void> {
  const gateway = loadGatewaySettings(env);
  const temporal = loadTemporalSettings(env);
  if (!temporal.address) {
    throw new ConfigError(
      'TEMPORAL_ADDRESS is not set: a standalone worker needs a Temporal server (try `vidbatch server`)',
    );
  }
  const connection = await NativeConnection.connect(temporal.connectionOptions);
  try {
    const worker = await createWorker({
      connection,
      namespace: temporal.namespace,
      taskQueue: temporal.taskQueue,
      gateway,
      outRoot,
      gatewayRps: loadGatewayRps(env),
    });
    announce(
      `vidbatch worker polling task queue "${temporal.taskQueue}" on ${temporal.address} (${temporal.namespace})`,
      {
        taskQueue: temporal.taskQueue,
        address: temporal.address,
        namespace: temporal.namespace,
      },
    );
    await worker.run();
  } finally {
    await connection.close();
  }
}
