// A session of the CLI: a Temporal client, plus what this process must run for it. Without TEMPORAL_ADDRESS the
// dev server another vidbatch process runs here is used (found through .vidbatch/server.json), or an embedded
// one (persistent SQLite under .vidbatch/) is started and claimed, so that only one process ever opens the
// database; a worker runs in this process when asked; `--simulate` adds the gateway simulator.
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import type { PathRoots } from '../activities/paths';
import {
  gatewayTarget,
  loadGatewaySettings,
  loadProvider,
  loadTemporalSettings,
  loadWorkerSettings,
  shutdownForceMs,
  simulatorTarget,
  type GatewaySettings,
  type TemporalSettings,
} from '../config';
import { ALLOW_DIR, shareAllowances } from '../dev-server/allowances';
import { DEFAULT_DB_FILE, startDevServer } from '../dev-server/dev-server';
import {
  claimLocalServer,
  findLocalServer,
  forgetLocalServer,
  localServerUsers,
  recordLocalServer,
  useLocalServer,
  STATE_DIR,
  type LocalServerOwner,
} from '../dev-server/local-server';
import { ConfigError } from '../errors';
import type { ProviderAdapter } from '../gateway/provider';
import { DEFAULT_PROVIDER } from '../gateway/providers';
import { startSimulator, type Simulator, type SimulatorOptions } from '../simulator/server';
import { createWorker } from '../worker';
import { isolatedQueue } from './task-queue';

/** The key the simulator started by `--simulate` registers (a local test key, not a secret). */
const SIMULATOR_KEY = 'sk-vidbatch-local-simulator';
/** Mean latency of simulated jobs under `--simulate` (± half of it). */
export const SIMULATED_JOB_SECONDS = 8;

/**
 * Where the simulator serves each provider's dialect (simulator/routes.ts, dialect-server.ts), as that
 * provider's base URL takes it; the adapter brings its own key scheme (fal's `Key`), which the simulator reads.
 */
const SIMULATOR_PATHS: Record<string, string> = {
  'model-gateway': '/v1',
  'openai-videos': '/openai/v1',
  fal: '/fal',
  replicate: '/replicate/v1',
};

/** The path of `provider`'s dialect on the simulator, below its origin: `--simulate`'s base URL. */
export function simulatorPath(provider: Pick<ProviderAdapter, 'name'>): string {
  const path = SIMULATOR_PATHS[provider.name];
  if (path === undefined)
    throw new ConfigError(
      `--simulate: the simulator speaks no ${provider.name} dialect (it speaks ${Object.keys(SIMULATOR_PATHS).join(', ')})`,
    );
  return path;
}

export interface SessionOptions {
  /** Start the gateway simulator and point the in-process worker at it. */
  simulate?: SimulatorOptions | boolean;
  /** Run a worker in this process; default: with --simulate, or without TEMPORAL_ADDRESS (a server on this machine). */
  worker?: boolean;
  /**
   * Folders the in-process worker may use besides its roots (VIDBATCH_INPUT_ROOT or the working directory,
   * VIDBATCH_OUT_ROOT...): `run` adds the CSV's folder and its --out / --download folders.
   */
  allow?: Partial<PathRoots>;
  /**
   * Without TEMPORAL_ADDRESS, which server: `embed` (default; `run`): the one running here, else an embedded
   * one other commands here may use while this process lives; `operator`: the one running here, else the
   * database opened for this command only (others wait for it); `lasting`: only a server that outlives this
   * command (`vidbatch server`), else a ConfigError saying what to start.
   */
  localServer?: 'embed' | 'operator' | 'lasting';
}

/** What this session talks to: TEMPORAL_ADDRESS, another vidbatch process's server here, or its own. */
export type ServerKind = 'address' | `local-${LocalServerOwner}` | 'embedded';

/** The message of an operator command, or a `--detach`, with no server to talk to. */
export const NO_SERVER_MESSAGE =
  'no vidbatch server is running here: start `vidbatch server` (or set TEMPORAL_ADDRESS)';

export interface Session {
  client: Client;
  taskQueue: string;
  /**
   * The target this process's worker pays on (config.ts gatewayTarget; `simulate:...` with --simulate). Unset
   * where this process runs no worker (a deployment's starter): its batches run for the target its workers
   * declare (client/target.ts).
   */
  target?: string;
  /**
   * The provider this process's worker sends to: a batch's rows get its defaults (startBatch). Unset where this
   * process runs no worker: GATEWAY_PROVIDER's (config.ts loadProvider).
   */
  provider?: ProviderAdapter;
  namespace: string;
  uiUrl?: string;
  /** Unset in sessions that tests and benchmarks build by hand. */
  server?: ServerKind;
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
  // A worker runs here when asked, with --simulate, or by default on this machine's server (no one else will).
  const wantWorker = options.worker ?? (!temporal.address || !!options.simulate);
  // Fail fast on gateway settings before starting anything.
  let gateway: GatewaySettings | undefined =
    wantWorker && !options.simulate ? loadGatewaySettings(env) : undefined;

  const cleanups: Cleanups = [];
  const close = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  };
  try {
    let simulator: Simulator | undefined;
    if (options.simulate) {
      // GATEWAY_PROVIDER picks the dialect the simulator is spoken to in (checked before anything starts).
      const provider = loadProvider(env);
      const byDefault = provider === DEFAULT_PROVIDER;
      const path = simulatorPath(provider);
      simulator = await startLocalSimulator(options.simulate, cleanups, byDefault ? undefined : provider);
      gateway = {
        baseUrl: `${simulator.origin}${path}`,
        ...(byDefault ? {} : { provider }),
        target: simulatorTarget(SIMULATOR_STATE_FILE, provider.name),
        apiKey: () => SIMULATOR_KEY,
        timeoutMs: 20_000,
      };
    }
    const server = temporal.address
      ? { connectionOptions: temporal.connectionOptions, uiUrl: undefined, kind: 'address' as const }
      : await localServer(env, options.localServer ?? 'embed', cleanups);
    const connection = await Connection.connect(server.connectionOptions);
    cleanups.push(() => connection.close());
    const client = new Client({ connection, namespace: temporal.namespace });

    let worker: Worker | undefined;
    let taskQueue = temporal.taskQueue;
    let target: string | undefined;
    if (wantWorker) {
      gateway ??= loadGatewaySettings(env);
      const { outRoot, roots, shutdownGraceMs, store } = loadWorkerSettings(env);
      target = gateway.target ?? gatewayTarget(gateway.baseUrl);
      // This process's worker is the one its batches wait for: a queue of its own target (see task-queue.ts).
      if (!temporal.address || simulator)
        taskQueue = isolatedQueue(temporal.taskQueue, { target, root: store ?? outRoot });
      const workerConnection = await NativeConnection.connect(server.connectionOptions);
      worker = await createWorker({
        connection: workerConnection,
        namespace: temporal.namespace,
        taskQueue,
        gateway,
        outRoot,
        roots: {
          input: [...roots.input, ...(options.allow?.input ?? [])],
          out: [...roots.out, ...(options.allow?.out ?? [])],
          download: [...roots.download, ...(options.allow?.download ?? [])],
          // On the folder's own queue this worker also runs the rows of the folder's other processes with the
          // same settings: it allows what they allow, and they what this one does (dev-server/allowances.ts).
          ...(!temporal.address || simulator
            ? await shareAllowances(resolve(ALLOW_DIR), taskQueue, options.allow, cleanups)
            : {}),
        },
        ...(store ? { store } : {}),
        shutdownGraceMs,
      });
      const running = worker.run();
      const forceMs = shutdownForceMs(shutdownGraceMs, gateway);
      cleanups.push(async () => {
        // Ctrl-C has already stopped it (the Runtime's signal handling); either way it may have to wait.
        if (worker!.getState() === 'RUNNING') worker!.shutdown();
        const { numInFlightActivities: inFlight } = worker!.getStatus();
        if (inFlight > 0)
          log(
            `Stopping this process's worker: waiting for ${inFlight} running ${inFlight === 1 ? 'activity' : 'activities'} ` +
              `(nothing new is sent to the gateway; a submit already sent is never abandoned; at most ${Math.ceil(forceMs / 1000)} s)`,
          );
        await running.catch(() => undefined);
        await workerConnection.close();
      });
    }
    return {
      client,
      taskQueue,
      ...(target ? { target } : {}),
      ...(gateway ? { provider: gateway.provider ?? DEFAULT_PROVIDER } : {}),
      namespace: temporal.namespace,
      uiUrl: server.uiUrl,
      server: server.kind,
      simulator,
      worker,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

export const SIMULATOR_STATE_FILE = join(STATE_DIR, 'simulator-state.json');

/** `--simulate`: the gateway simulator with its state under .vidbatch/, so a second run finds its jobs. */
async function startLocalSimulator(
  simulate: SimulatorOptions | true,
  cleanups: Cleanups,
  /** The dialect it is spoken to in, when not the Model Gateway's. */
  provider?: ProviderAdapter,
): Promise<Simulator> {
  await mkdir(STATE_DIR, { recursive: true });
  const simulator = await startSimulator({
    apiKeys: [SIMULATOR_KEY],
    stateFile: SIMULATOR_STATE_FILE,
    jobSeconds: SIMULATED_JOB_SECONDS,
    jobJitterSeconds: SIMULATED_JOB_SECONDS / 2,
    ...(typeof simulate === 'object' ? simulate : {}),
  });
  cleanups.push(() => simulator.close());
  log(
    provider
      ? `Gateway simulator at ${simulator.origin}${simulatorPath(provider)} (${provider.name})`
      : `Gateway simulator at ${simulator.baseUrl}`,
  );
  return simulator;
}

/** Without TEMPORAL_ADDRESS: the dev server another vidbatch process runs here, or one this process claims. */
async function localServer(
  env: NodeJS.ProcessEnv,
  mode: NonNullable<SessionOptions['localServer']>,
  cleanups: Cleanups,
): Promise<{
  connectionOptions: TemporalSettings['connectionOptions'];
  uiUrl: string | undefined;
  kind: ServerKind;
}> {
  const dbFile = env.VIDBATCH_DB_FILE ?? DEFAULT_DB_FILE;
  const owner: LocalServerOwner = mode === 'operator' ? 'operator' : 'run';
  // Marked before looking: an owner that is closing looks for users only after it stopped showing its address,
  // so a process that saw the address is always seen (waitForServerUsers).
  cleanups.push(await useLocalServer());
  for (;;) {
    const local = await findLocalServer(60_000, log);
    if (local?.address) {
      if (mode === 'lasting' && local.owner !== 'server')
        throw new ConfigError(
          `the dev server here belongs to a \`vidbatch run\` (pid ${local.pid}) and stops with it: start \`vidbatch server\` (or set TEMPORAL_ADDRESS)`,
        );
      if (mode !== 'operator')
        log(`Using the vidbatch dev server already running at ${local.address} (pid ${local.pid})`);
      return {
        connectionOptions: { address: local.address },
        uiUrl: local.uiUrl,
        kind: `local-${local.owner}`,
      };
    }
    if (mode === 'lasting') throw new ConfigError(NO_SERVER_MESSAGE);
    // Nothing to read: do not create an empty database for an operator command.
    if (mode === 'operator' && !existsSync(dbFile)) throw new ConfigError(NO_SERVER_MESSAGE);
    if (await claimLocalServer(owner, dbFile)) break;
    // Another process claimed it between our look and our claim: use (or wait for) its server.
  }
  let server: Awaited<ReturnType<typeof startDevServer>>;
  try {
    if (mode === 'operator')
      log(`No vidbatch server is running here: opening ${dbFile} for this command only.`);
    server = await startDevServer({ dbFile, log: mode === 'operator' ? () => {} : log });
  } catch (err) {
    await forgetLocalServer();
    throw err;
  }
  const info = {
    pid: process.pid,
    owner,
    address: server.address,
    ...(server.uiUrl ? { uiUrl: server.uiUrl } : {}),
    dbFile,
  };
  cleanups.push(async () => {
    for (;;) {
      await waitForServerUsers();
      // Closing: the record loses its address (others wait instead of connecting), then one more look for a
      // process that found the address just before; if there is one, the server stays up for it.
      await recordLocalServer({ pid: process.pid, owner, dbFile });
      if ((await localServerUsers()).length === 0) break;
      await recordLocalServer(info);
    }
    // Stop first: the claim is released only once the database is closed.
    await server.stop();
    await forgetLocalServer();
  });
  await recordLocalServer(info);
  return { connectionOptions: { address: server.address }, uiUrl: server.uiUrl, kind: 'embedded' };
}

/**
 * The embedded server outlives this command while other vidbatch processes here use it (a second terminal's
 * `run`): stopping it would cut their batches off. Bounded by those processes' own lives.
 */
async function waitForServerUsers(): Promise<void> {
  let told = '';
  for (let users = await localServerUsers(); users.length; users = await localServerUsers()) {
    const now = users.join(', ');
    if (now !== told) {
      log(
        `Keeping the embedded Temporal server up for the other vidbatch ${users.length === 1 ? 'process' : 'processes'} ` +
          `using it (pid ${now}); this command ends when ${users.length === 1 ? 'it ends' : 'they end'}. ` +
          '(`vidbatch server` in a terminal of its own avoids the wait.)',
      );
      told = now;
    }
    await sleep(500);
  }
}
