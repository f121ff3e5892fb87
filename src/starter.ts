// Starting and following batches. The batch id comes from the CSV's content, so running the same file again
// attaches to the same batch. Without TEMPORAL_ADDRESS, an embedded dev server (persistent SQLite under
// .vidbatch/) and an in-process worker are started; `--simulate` adds the gateway simulator.
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  Client,
  Connection,
  WorkflowExecutionAlreadyStartedError,
  type WorkflowHandle,
} from '@temporalio/client';
import { NativeConnection, type Worker, type WorkflowBundle } from '@temporalio/worker';
import { loadGatewaySettings, loadTemporalSettings, type GatewaySettings } from './config';
import { loadValidCsv, type ParsedCsv } from './input/csv';
import { startSimulator, type Simulator, type SimulatorOptions } from './simulator/server';
import { progressQuery } from './contract/messages';
import { BatchIdAttr, StateAttr } from './contract/search-attributes';
import {
  DEFAULT_BATCH_OPTIONS,
  type BatchInput,
  type BatchOptions,
  type BatchProgress,
  type BatchResult,
} from './contract/types';
import { DEFAULT_DB_FILE, startDevServer, type DevServer } from './dev-server/dev-server';
import { createWorker } from './worker';
import { batchWorkflow } from './workflows';

export const STATE_DIR = '.vidbatch';
/** Written while an embedded server runs, so other vidbatch commands on this machine can find it. */
const LOCAL_SERVER_FILE = join(STATE_DIR, 'server.json');
/** The key the simulator started by `--simulate` registers (a local test key, not a secret). */
const SIMULATOR_KEY = 'sk-vidbatch-local-simulator';
/** Mean latency of simulated jobs under `--simulate` (± half of it). */
export const SIMULATED_JOB_SECONDS = 8;

export function batchIdFor(csv: ParsedCsv): string {
  return `batch-${csv.sha256.slice(0, 16)}`;
}

export interface SessionOptions {
  env?: NodeJS.ProcessEnv;
  /** Start the gateway simulator and point the in-process worker at it. */
  simulate?: SimulatorOptions | boolean;
  /** Run a worker in this process; default: with --simulate or an embedded server. false: never (operator commands). */
  worker?: boolean;
  outRoot?: string;
  workflowBundle?: WorkflowBundle;
  log?: (message: string) => void;
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

interface LocalServerInfo {
  address: string;
  uiUrl?: string;
  pid: number;
}

async function runningLocalServer(): Promise<LocalServerInfo | undefined> {
  try {
    const info = JSON.parse(await readFile(LOCAL_SERVER_FILE, 'utf8')) as LocalServerInfo;
    process.kill(info.pid, 0); // throws when that process is gone
    return info;
  } catch {
    return undefined;
  }
}

/** Connects to Temporal (starting the embedded server if needed) and, when asked, the simulator and a worker. */
export async function openSession(options: SessionOptions = {}): Promise<Session> {
  const env = options.env ?? process.env;
  const log = options.log ?? ((m: string) => console.error(m));
  const temporal = loadTemporalSettings(env);
  // A worker runs here when asked, with --simulate, or by default with an embedded server (no one else can).
  const wantWorker = (embedded: boolean) => options.worker ?? (embedded || !!options.simulate);
  // Fail fast on gateway settings before starting anything.
  let gateway: GatewaySettings | undefined =
    wantWorker(!temporal.address) && !options.simulate ? loadGatewaySettings(env) : undefined;

  const cleanups: (() => Promise<void>)[] = [];
  const close = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  };
  try {
    let simulator: Simulator | undefined;
    if (options.simulate) {
      await mkdir(STATE_DIR, { recursive: true });
      simulator = await startSimulator({
        apiKeys: [SIMULATOR_KEY],
        stateFile: join(STATE_DIR, 'simulator-state.json'),
        jobSeconds: SIMULATED_JOB_SECONDS,
        jobJitterSeconds: SIMULATED_JOB_SECONDS / 2,
        ...(typeof options.simulate === 'object' ? options.simulate : {}),
      });
      cleanups.push(() => simulator!.close());
      gateway = { baseUrl: simulator.baseUrl, apiKey: () => SIMULATOR_KEY, timeoutMs: 20_000 };
      log(`Gateway simulator at ${simulator.baseUrl}`);
    }

    let connectionOptions = temporal.connectionOptions;
    let uiUrl: string | undefined;
    let embedded = false;
    if (!temporal.address) {
      const local = await runningLocalServer();
      if (local) {
        connectionOptions = { address: local.address };
        uiUrl = local.uiUrl;
        log(`Using the vidbatch dev server already running at ${local.address}`);
      } else {
        const server: DevServer = await startDevServer({
          dbFile: env.VIDBATCH_DB_FILE ?? DEFAULT_DB_FILE,
          log,
        });
        cleanups.push(async () => {
          await rm(LOCAL_SERVER_FILE, { force: true });
          await server.stop();
        });
        await mkdir(STATE_DIR, { recursive: true }); // VIDBATCH_DB_FILE may live elsewhere
        await writeFile(
          LOCAL_SERVER_FILE,
          JSON.stringify({ address: server.address, uiUrl: server.uiUrl, pid: process.pid }),
        );
        connectionOptions = { address: server.address };
        uiUrl = server.uiUrl;
        embedded = true;
      }
    }
    const connection = await Connection.connect(connectionOptions);
    cleanups.push(() => connection.close());
    const client = new Client({ connection, namespace: temporal.namespace });

    let worker: Worker | undefined;
    if (wantWorker(embedded)) {
      gateway ??= loadGatewaySettings(env);
      const workerConnection = await NativeConnection.connect(connectionOptions);
      worker = await createWorker({
        connection: workerConnection,
        namespace: temporal.namespace,
        taskQueue: temporal.taskQueue,
        gateway,
        outRoot: options.outRoot,
        workflowBundle: options.workflowBundle,
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
      uiUrl,
      simulator,
      worker,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

export interface StartBatchOptions extends Partial<Omit<BatchOptions, 'poll'>> {
  poll?: Partial<BatchOptions['poll']>;
  /** This batch retries the failed rows of that one. */
  retryOf?: string;
}

/** Drops undefined values, so an unset flag never overrides a default. */
function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Validates the CSV (nothing is submitted from a file with errors), then starts its batch or attaches to it. */
export async function startBatch(
  session: Session,
  csvPath: string,
  options: StartBatchOptions = {},
  /** The file already parsed and validated by the caller, so it is not read twice. */
  parsed?: ParsedCsv,
): Promise<{
  handle: WorkflowHandle<typeof batchWorkflow>;
  batchId: string;
  attached: boolean;
  csv: ParsedCsv;
}> {
  const csv = parsed ?? (await loadValidCsv(csvPath));
  const batchId = batchIdFor(csv);
  const { retryOf, ...rest } = options;
  const batchOptions: BatchOptions = {
    ...DEFAULT_BATCH_OPTIONS,
    ...definedOnly(rest),
    poll: { ...DEFAULT_BATCH_OPTIONS.poll, ...definedOnly(options.poll ?? {}) },
    ...(options.outDir ? { outDir: resolve(options.outDir) } : {}),
  };
  const input: BatchInput = {
    batchId,
    csvPath: resolve(csvPath),
    csvSha256: csv.sha256,
    totalRows: csv.rows.length,
    options: batchOptions,
    ...(retryOf ? { retryOf } : {}),
  };
  const previous = await session.client.workflow
    .getHandle(batchId)
    .describe()
    .catch(() => undefined);
  // Failed, cancelled or terminated batches may be started again; running or completed ones are attached to.
  const attached = !!previous && ['RUNNING', 'COMPLETED', 'CONTINUED_AS_NEW'].includes(previous.status.name);
  try {
    const handle = await session.client.workflow.start(batchWorkflow, {
      workflowId: batchId,
      taskQueue: session.taskQueue,
      args: [input],
      // Same file again: attach to the running batch; a finished batch is never run twice.
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      typedSearchAttributes: [
        { key: BatchIdAttr, value: batchId },
        { key: StateAttr, value: 'running' },
      ],
      staticSummary: `vidbatch: ${csv.rows.length} prompts from ${csvPath}`,
      staticDetails:
        `**CSV:** ${resolve(csvPath)}\n\n**sha256:** ${csv.sha256}\n\n**Window:** ${batchOptions.concurrency} prompts` +
        (retryOf ? `\n\n**Retries the failed rows of:** ${retryOf}` : ''),
      ...(retryOf ? { memo: { retryOf } } : {}),
    });
    return { handle, batchId, attached, csv };
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    return {
      handle: session.client.workflow.getHandle<typeof batchWorkflow>(batchId),
      batchId,
      attached: true,
      csv,
    };
  }
}

export async function getProgress(handle: WorkflowHandle): Promise<BatchProgress | undefined> {
  try {
    return await handle.query(progressQuery);
  } catch {
    return undefined; // between runs (continue-as-new) or no worker yet
  }
}

/** Waits for the batch to finish, reporting progress; stops following (the batch keeps running) on abort. */
export async function followBatch(
  handle: WorkflowHandle<typeof batchWorkflow>,
  onProgress: (p: BatchProgress) => void,
  signal?: AbortSignal,
  intervalMs = 1000,
): Promise<BatchResult | undefined> {
  let done = false;
  // The result long-poll must be cancelled when we stop following, or it outlives the closed connection.
  const stopFollowing = new AbortController();
  signal?.addEventListener('abort', () => stopFollowing.abort(), { once: true });
  const result = handle.client
    .withAbortSignal(stopFollowing.signal, () => handle.result())
    .finally(() => (done = true));
  while (!done && !signal?.aborted) {
    const p = await getProgress(handle);
    if (p) onProgress(p);
    await Promise.race([
      sleep(intervalMs, undefined, { signal }).catch(() => undefined),
      result.catch(() => undefined),
    ]);
  }
  // Stopped by the caller: the batch goes on; report a result only if it happened to finish first.
  if (signal?.aborted) return result.catch(() => undefined);
  return result;
}
