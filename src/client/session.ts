// A session of the CLI: a Temporal client, plus what this process must run for it. Without TEMPORAL_ADDRESS an
// embedded dev server (persistent SQLite under .vidbatch/) is started, or one already running on this machine
// is used; a worker runs in this process when no one else can run it; `--simulate` adds the gateway simulator.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import {
  loadGatewaySettings,
  loadTemporalSettings,
  type GatewaySettings,
  type TemporalSettings,
} from '../config';
import { DEFAULT_DB_FILE, startDevServer } from '../dev-server/dev-server';
import {
  forgetLocalServer,
  recordLocalServer,
  runningLocalServer,
  STATE_DIR,
} from '../dev-server/local-server';
import { startSimulator, type Simulator, type SimulatorOptions } from '../simulator/server';
import { createWorker } from '../worker';

/** The key the simulator started by `--simulate` registers (a local test key, not a secret). */
const SIMULATOR_KEY = 'sk-vidbatch-local-simulator';
/** Mean latency of simulated jobs under `--simulate` (± half of it). */
export const SIMULATED_JOB_SECONDS = 8;

export interface SessionOptions {
  /** Start the gateway simulator and point the in-process worker at it. */
  simulate?: SimulatorOptions | boolean;
  /** Run a worker in this process; default: with --simulate or an embedded server. false: never (operator commands). */
  worker?: boolean;
}

export interface Session {
  client: Client;
  taskQueue: string;
  namespace: string;
  uiUrl?: string;
  simulator?: Simulator;
  worker?: Worker;
  close(): Promise<void>;
}

type Cleanups = (() => Promise<void>)[];
const log = (m: string) => console.error(m);

/** Connects to Temporal (starting the embedded server if needed) and, when asked, the simulator and a worker. */
export async function openSession(options: SessionOptions = {}): Promise<Session> {
  const env = process.env;
  const temporal = loadTemporalSettings(env);
  // A worker runs here when asked, with --simulate, or by default with an embedded server (no one else can).
  const wantWorker = (embedded: boolean) => options.worker ?? (embedded || !!options.simulate);
  // Fail fast on gateway settings before starting anything.
  let gateway: GatewaySettings | undefined =
    wantWorker(!temporal.address) && !options.simulate ? loadGatewaySettings(env) : undefined;

  const cleanups: Cleanups = [];
  const close = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  };
  try {
    let simulator: Simulator | undefined;
    if (options.simulate) {
      simulator = await startLocalSimulator(options.simulate, cleanups);
      gateway = { baseUrl: simulator.baseUrl, apiKey: () => SIMULATOR_KEY, timeoutMs: 20_000 };
    }
    const server = temporal.address
      ? { connectionOptions: temporal.connectionOptions, uiUrl: undefined, embedded: false }
      : await localServer(env, cleanups);
    const connection = await Connection.connect(server.connectionOptions);
    cleanups.push(() => connection.close());
    const client = new Client({ connection, namespace: temporal.namespace });

    let worker: Worker | undefined;
    if (wantWorker(server.embedded)) {
      gateway ??= loadGatewaySettings(env);
      const workerConnection = await NativeConnection.connect(server.connectionOptions);
      worker = await createWorker({
        connection: workerConnection,
        namespace: temporal.namespace,
        taskQueue: temporal.taskQueue,
        gateway,
      });
      const running = worker.run();
      cleanups.push(async () => {
        if (worker!.getState() === 'RUNNING') worker!.shutdown();
        await running.catch(() => undefined);
        await workerConnection.close();
      });
    }
    return {
      client,
      taskQueue: temporal.taskQueue,
      namespace: temporal.namespace,
      uiUrl: server.uiUrl,
      simulator,
      worker,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** `--simulate`: the gateway simulator with its state under .vidbatch/, so a second run finds its jobs. */
async function startLocalSimulator(
  simulate: SimulatorOptions | true,
  cleanups: Cleanups,
): Promise<Simulator> {
  await mkdir(STATE_DIR, { recursive: true });
  const simulator = await startSimulator({
    apiKeys: [SIMULATOR_KEY],
    stateFile: join(STATE_DIR, 'simulator-state.json'),
    jobSeconds: SIMULATED_JOB_SECONDS,
    jobJitterSeconds: SIMULATED_JOB_SECONDS / 2,
    ...(typeof simulate === 'object' ? simulate : {}),
  });
  cleanups.push(() => simulator.close());
  log(`Gateway simulator at ${simulator.baseUrl}`);
  return simulator;
}

/** Without TEMPORAL_ADDRESS: the dev server another vidbatch command runs here, or an embedded one. */
async function localServer(
  env: NodeJS.ProcessEnv,
  cleanups: Cleanups,
): Promise<{
  connectionOptions: TemporalSettings['connectionOptions'];
  uiUrl: string | undefined;
  embedded: boolean;
}> {
  const local = await runningLocalServer();
  if (local) {
    log(`Using the vidbatch dev server already running at ${local.address}`);
    return { connectionOptions: { address: local.address }, uiUrl: local.uiUrl, embedded: false };
  }
  const server = await startDevServer({ dbFile: env.VIDBATCH_DB_FILE ?? DEFAULT_DB_FILE, log });
  cleanups.push(async () => {
    await forgetLocalServer();
    await server.stop();
  });
  await recordLocalServer({ address: server.address, uiUrl: server.uiUrl, pid: process.pid });
  return { connectionOptions: { address: server.address }, uiUrl: server.uiUrl, embedded: true };
}
