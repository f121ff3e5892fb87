// The vidbatch worker: runs batch and prompt workflows and their activities; the gateway calls on a second
// Worker of the same process, on the rate-limited gateway queue (worker/gateway-worker.ts). `createWorker` is used by
// `vidbatch worker`, by `vidbatch run` (in-process worker) and by the tests.
import { rm, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { loadNoticeSecret } from './notices/deliver';
import { createActivities } from './activities';
import { openStore } from './store/open-store';
import type { PathRoots } from './activities/paths';
import {
  DEFAULT_SHUTDOWN_GRACE_MS,
  loadGatewaySettings,
  loadTemporalSettings,
  loadWorkerSettings,
  loadWorkerVersioning,
  settingsTarget,
  shutdownForceMs,
  type GatewaySettings,
  type WorkerVersion,
} from './config';
import { GATEWAY_ACTIVITIES } from './contract/rate-budget';
import { workerIdentity } from './contract/target';
import { ConfigError } from './errors';
import { GatewayClient } from './gateway/client';
import { loadGatewayRps, withGatewayWorker } from './worker/gateway-worker';
import { announce } from './worker/runtime';
import { deploymentOptions, makeCurrent, MAKE_CURRENT_TIMEOUT_MS, versionName } from './worker/versioning';
import { cachedWorkflowBundle } from './worker/workflow-bundle';

export const WORKFLOWS_PATH = fileURLToPath(new URL('./workflows/index.ts', import.meta.url));

export interface CreateWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  gateway: GatewaySettings;
  /** Root of the per-batch output folders; default `./out`. */
  outRoot?: string;
  /** Where activities may read CSVs and write results and videos; undefined: anywhere (tests, embedding). */
  roots?: PathRoots;
  /** The shared object store (VIDBATCH_STORE, `s3://bucket/prefix`) batches may keep their input in. */
  store?: string;
  /** How long a stopping worker lets running activities finish on their own; default 30 s. */
  shutdownGraceMs?: number;
  /** A prebuilt bundle (tests build one per run); default: the cached bundle of `src/workflows`. */
  workflowBundle?: WorkflowBundle;
  maxConcurrentActivities?: number;
  /** Pin the gateway queue's rate limit (requests/second); default: learned (docs/rate-budget.md). */
  gatewayRps?: number;
  /** The webhook secret notices are signed with; default VIDBATCH_NOTIFY_SECRET(_FILE) (none: unsigned notices fail). */
  noticeSecret?: string;
  /**
   * Worker Versioning: both Workers of the process run as this Deployment Version (worker/versioning.ts);
   * undefined: unversioned.
   */
  version?: WorkerVersion;
}

export async function createWorker(options: CreateWorkerOptions): Promise<Worker> {
  const grace = options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
  const gateway = new GatewayClient(options.gateway);
  const workflowBundle =
    options.workflowBundle ??
    (await cachedWorkflowBundle(WORKFLOWS_PATH).catch((err: unknown) => {
      // Still works, at the cost of bundling in this process.
      announce(`could not use a cached workflow bundle (${String(err)}); bundling in the worker`, {});
      return undefined;
    }));
  const outRoot = options.outRoot ?? 'out';
  const activities = createActivities({
    gateway,
    outRoot,
    roots: options.roots,
    ...(options.store ? { store: await openStore(options.store, outRoot) } : {}),
    noticeSecret: options.noticeSecret ?? loadNoticeSecret(),
  });
  // Gateway calls run only on the gateway queue, where its rate limit paces them.
  const gatewayCalls: readonly string[] = GATEWAY_ACTIVITIES;
  const mainActivities = Object.fromEntries(
    Object.entries(activities).filter(([name]) => !gatewayCalls.includes(name)),
  );
  const worker = await Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    // The worker declares the target it pays on: a starter that holds no gateway settings (a deployment) names
    // its batches after it (client/target.ts).
    identity: workerIdentity(settingsTarget(options.gateway), `${process.pid}@${hostname()}`),
    ...(workflowBundle ? { workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    activities: mainActivities,
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivities ?? 200,
    // Explicit, because the SDK's default follows the heap limit: a worker run with a small
    // --max-old-space-size would otherwise cache 10 workflows and replay the rest on every task.
    maxCachedWorkflows: 600,
    // On shutdown (SIGTERM, SIGINT: the Runtime's signal handling) the worker stops polling at once, the
    // gateway client sends nothing new (gateway-worker.ts stops it), and running activities get this long to
    // finish before they are cancelled. Gateway requests on the wire ignore that cancellation (the client
    // aborts a submit only at GATEWAY_SUBMIT_TIMEOUT_MS), so a submit still records its job id: the force
    // time waits for the longest of them (config.ts shutdownForceMs).
    shutdownGraceTime: grace,
    shutdownForceTime: shutdownForceMs(grace, gateway),
    ...(options.version ? { workerDeploymentOptions: deploymentOptions(options.version) } : {}),
  });
  // Gateway calls run on their own, rate-limited queue, polled by a second Worker (docs/rate-budget.md).
  return withGatewayWorker(worker, { ...options, gateway, activities, shutdownGraceMs: grace });
}

/**
 * `vidbatch worker`: connects with Temporal's environment configuration and runs until SIGINT/SIGTERM, then
 * drains (see createWorker) and returns. Settings are checked before connecting anywhere.
 */
export async function runWorker(env: NodeJS.ProcessEnv = process.env, outRoot?: string): Promise<void> {
  const gateway = loadGatewaySettings(env);
  const settings = loadWorkerSettings(env, outRoot);
  const temporal = loadTemporalSettings(env);
  const versioning = loadWorkerVersioning(env);
  if (!temporal.address) {
    throw new ConfigError(
      'TEMPORAL_ADDRESS is not set: a standalone worker needs a Temporal server (try `vidbatch server`)',
    );
  }
  const ready = readyFile(settings.readyFile);
  await ready.clear(); // a file left by a killed process must not vouch for this one
  const connection = await NativeConnection.connect(temporal.connectionOptions);
  try {
    const worker = await createWorker({
      connection,
      namespace: temporal.namespace,
      taskQueue: temporal.taskQueue,
      gateway,
      outRoot: settings.outRoot,
      roots: settings.roots,
      ...(settings.store ? { store: settings.store } : {}),
      shutdownGraceMs: settings.shutdownGraceMs,
      gatewayRps: loadGatewayRps(env),
      ...(versioning ? { version: versioning.version } : {}),
    });
    const forceMs = shutdownForceMs(settings.shutdownGraceMs, gateway);
    const onSignal = (signal: string) => {
      void ready.clear();
      const { numInFlightActivities: running } = worker.getStatus();
      announce(
        `${signal}: vidbatch worker stopping: no new tasks, no new gateway requests; ` +
          `${running} running ${running === 1 ? 'activity gets' : 'activities get'} ${seconds(settings.shutdownGraceMs)} to finish, ` +
          `gateway calls already sent wait for their answer; exiting within ${seconds(forceMs)}`,
        { signal, runningActivities: running, graceMs: settings.shutdownGraceMs, forceMs },
      );
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
    const running = worker.run(); // polling from here on (state RUNNING)
    await ready.mark();
    announce(
      `vidbatch worker polling task queue "${temporal.taskQueue}" on ${temporal.address} (${temporal.namespace})` +
        (versioning ? ` as version ${versionName(versioning.version)}` : ''),
      {
        taskQueue: temporal.taskQueue,
        address: temporal.address,
        namespace: temporal.namespace,
        ...(versioning ? { deploymentVersion: versionName(versioning.version) } : {}),
      },
    );
    if (versioning?.makeCurrent) void announceCurrent(connection, temporal.namespace, versioning.version);
    try {
      await running;
    } finally {
      process.removeListener('SIGTERM', onSignal);
      process.removeListener('SIGINT', onSignal);
      await ready.clear();
    }
    announce('vidbatch worker stopped', {});
  } finally {
    await connection.close();
  }
}

/** `--make-current`: the build is made current once the server has seen it poll, and the worker says so. */
async function announceCurrent(connection: NativeConnection, namespace: string, version: WorkerVersion) {
  const name = versionName(version);
  const failed = await makeCurrent(
    connection,
    namespace,
    version,
    `vidbatch worker ${process.pid}@${hostname()}`,
  );
  if (failed === undefined) announce(`vidbatch worker: version ${name} is now current`, { version: name });
  else
    announce(
      `vidbatch worker: could not make version ${name} current within ${seconds(MAKE_CURRENT_TIMEOUT_MS)} (${failed}); ` +
        `this worker gets no new workflows until it is: temporal worker deployment set-current-version ` +
        `--deployment-name ${version.deploymentName} --build-id ${version.buildId}`,
      { version: name, error: failed },
    );
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

/**
 * VIDBATCH_READY_FILE: exists, and is touched every 10 s, while the worker polls; removed when it stops. A
 * healthcheck tests that it exists and is fresh (an event loop that stalls stops touching it).
 */
function readyFile(path: string | undefined) {
  let timer: NodeJS.Timeout | undefined;
  return {
    async mark() {
      if (!path) return;
      await writeFile(path, `${process.pid}\n`);
      timer = setInterval(() => {
        const now = new Date();
        utimes(path, now, now).catch(() => undefined);
      }, 10_000).unref();
    },
    async clear() {
      clearInterval(timer);
      if (path) await rm(path, { force: true });
    },
  };
}
