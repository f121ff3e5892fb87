// Shared wiring for tests that run batches on the real dev server against the real simulator.
import { randomUUID } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, type Worker, type WorkflowBundle } from '@temporalio/worker';
import { inject } from 'vitest';
import { gatewayTarget, type GatewaySettings } from '../../src/config';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/server';
import type { PollSchedule } from '../../src/contract/batch-options';
import type { BatchProgress } from '../../src/contract/progress';
import { getProgress } from '../../src/client/batches';
import type { Session } from '../../src/client/session';
import { createWorker, WORKFLOWS_PATH } from '../../src/worker';

let bundle: Promise<WorkflowBundle> | undefined;
/** One workflow bundle per test process (bundling takes about a second). */
export function workflowBundle(): Promise<WorkflowBundle> {
  return (bundle ??= bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    logger: { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} },
  }));
}

/** A poll schedule for simulated jobs lasting well under a second. */
export const FAST_POLL: PollSchedule = {
  firstPollMs: 300,
  intervalMs: 200,
  backoff: 1.2,
  capMs: 1000,
  jitter: 0.1,
  adaptive: true,
};

export interface TestEnv {
  sim: Simulator;
  client: Client;
  session: Session;
  taskQueue: string;
  dir: string;
  address: string;
  /** Starts an in-process worker (the caller may pass other gateway settings, e.g. a rotating key). */
  startWorker(gateway?: Partial<GatewaySettings>): Promise<Worker>;
  close(): Promise<void>;
}

export async function testEnv(simOptions: SimulatorOptions = {}): Promise<TestEnv> {
  const address = inject('temporalAddress');
  const sim = await startSimulator({ jobSeconds: 0.5, jobJitterSeconds: 0.2, ...simOptions });
  const connection = await Connection.connect({ address });
  const client = new Client({ connection });
  const taskQueue = `test-${randomUUID()}`;
  const dir = await mkdtemp(join(tmpdir(), 'vidbatch-test-'));
  const workers: { worker: Worker; running: Promise<void>; connection: NativeConnection }[] = [];
  // Its batches run for the simulator's target, as its workers' (startWorker) declare.
  const session: Session = {
    client,
    taskQueue,
    namespace: 'default',
    target: gatewayTarget(sim.baseUrl),
    close: async () => {},
  };
  return {
    sim,
    client,
    session,
    taskQueue,
    dir,
    address,
    async startWorker(gateway = {}) {
      const nativeConnection = await NativeConnection.connect({ address });
      const worker = await createWorker({
        connection: nativeConnection,
        namespace: 'default',
        taskQueue,
        gateway: { baseUrl: sim.baseUrl, apiKey: () => sim.apiKey, timeoutMs: 2000, ...gateway },
        outRoot: join(dir, 'out'),
        workflowBundle: await workflowBundle(),
      });
      workers.push({ worker, running: worker.run(), connection: nativeConnection });
      return worker;
    },
    async close() {
      for (const w of workers) {
        if (w.worker.getState() === 'RUNNING') w.worker.shutdown();
        await w.running.catch(() => undefined);
        await w.connection.close();
      }
      await connection.close();
      await sim.close();
    },
  };
}

/** Polls the batch's progress until `predicate` holds (or throws after `timeoutMs`). */
export async function waitForProgress(
  handle: WorkflowHandle,
  predicate: (p: BatchProgress) => boolean,
  timeoutMs = 60_000,
): Promise<BatchProgress> {
  const deadline = Date.now() + timeoutMs;
  let last: BatchProgress | undefined;
  while (Date.now() < deadline) {
    last = await getProgress(handle);
    if (last && predicate(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`progress never matched; last: ${JSON.stringify(last)}`);
}

/** Total history events of a workflow id, over all its runs (continue-as-new included). */
export async function historyEvents(client: Client, workflowId: string): Promise<number> {
  let total = 0;
  for await (const execution of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    const history = await client.workflow.getHandle(workflowId, execution.runId).fetchHistory();
    total += history.events?.length ?? 0;
  }
  return total;
}

/** The settings that point a spawned vidbatch at this test's server, task queue and simulator. */
export function cliSettings(e: TestEnv): Record<string, string> {
  return {
    TEMPORAL_ADDRESS: e.address,
    VIDBATCH_TASK_QUEUE: e.taskQueue,
    GATEWAY_BASE_URL: e.sim.baseUrl,
    GATEWAY_API_KEY: e.sim.apiKey,
  };
}

/** Environment for a vidbatch CLI process that should use this test's server, task queue and simulator. */
export function cliEnv(e: TestEnv, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    TEMPORAL_ADDRESS: e.address,
    VIDBATCH_TASK_QUEUE: e.taskQueue,
    GATEWAY_BASE_URL: e.sim.baseUrl,
    GATEWAY_API_KEY: e.sim.apiKey,
    // A standalone worker reads CSVs only under its input root; the tests write theirs in `dir`.
    VIDBATCH_INPUT_ROOT: e.dir,
    ...extra,
  };
}
