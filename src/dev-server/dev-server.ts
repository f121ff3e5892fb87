// Runs `temporal server start-dev` as a child process: persistent SQLite, Web UI on, vidbatch's search
// attributes registered, free ports so parallel runs never collide, and a clean shutdown.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { DevServerError } from '../errors';
import { SEARCH_ATTRIBUTES } from '../contract/search-attributes';
import { findTemporalCli, runCli, type FindCliOptions } from './cli-binary';

export interface DevServerOptions extends FindCliOptions {
  /** SQLite file; default `./.vidbatch/temporal.db`. Pass `':memory:'` for a throwaway server. */
  dbFile?: string;
  namespace?: string;
  /** Fixed ports; each defaults to a free one. */
  port?: number;
  uiPort?: number;
  headless?: boolean;
  readyTimeoutMs?: number;
}

export interface DevServer {
  address: string;
  namespace: string;
  uiUrl: string | undefined;
  dbFile: string | undefined;
  cliPath: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

export const DEFAULT_DB_FILE = '.vidbatch/temporal.db';

/**
 * Dynamic config for vidbatch's gateway queues (docs/rate-budget.md): fairness between batches (fairness key =
 * batch id) and one partition per task queue, so a queue rate limit is exact and holds for a short backlog
 * too (with the default 4 partitions each gets rps/4). On the dev server these apply to every queue.
 */
export const DEV_SERVER_DYNAMIC_CONFIG: Record<string, string> = {
  'matching.enableFairness': 'true',
  'matching.numTaskqueueReadPartitions': '1',
  'matching.numTaskqueueWritePartitions': '1',
};

/** Asks the OS for a free TCP port on loopback. */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

async function waitUntilReady(address: string, child: ChildProcess, output: () => string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new DevServerError(`temporal server exited with code ${child.exitCode}:\n${output()}`);
    }
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1000 });
      try {
        await connection.workflowService.getSystemInfo({});
        return;
      } finally {
        await connection.close();
      }
    } catch {
      await sleep(200);
    }
  }
  throw new DevServerError(`temporal server at ${address} was not ready after ${timeoutMs} ms:\n${output()}`);
}

async function waitForHttp(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(url);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  throw new DevServerError(`the Temporal Web UI at ${url} did not answer after ${timeoutMs} ms`);
}

/** Registers vidbatch's search attributes; start-dev ignores --search-attribute for an existing db file. */
async function registerSearchAttributes(cli: string, address: string, namespace: string): Promise<void> {
  for (const { name, type } of SEARCH_ATTRIBUTES) {
    try {
      await runCli(cli, [
        'operator',
        'search-attribute',
        'create',
        '--address',
        address,
        '--namespace',
        namespace,
        '--name',
        name,
        '--type',
        type,
      ]);
    } catch (err) {
      const stderr = String((err as { stderr?: string }).stderr ?? err);
      if (!/already exists/i.test(stderr)) {
        throw new DevServerError(`registering search attribute ${name} failed: ${stderr.split('\n')[0]}`);
      }
    }
  }
}

export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  const log = options.log ?? ((m: string) => console.error(m));
  const { path: cliPath } = await findTemporalCli(options);
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch(cliPath, options, log);
    } catch (err) {
      // Free ports are picked before the server binds them: another process can take one meanwhile.
      // Picked ports (the HTTP API's and the metrics' always) are picked again; a port the caller chose
      // is not, since the caller needs that one.
      const taken = takenPort(String(err));
      const chosen = [options.port, options.uiPort].filter((p) => p !== undefined);
      if (taken === undefined || chosen.includes(taken) || attempt >= 3) throw err;
      log(`a port was taken while the Temporal dev server started; trying other ports (${attempt}/2)`);
    }
  }
}

/**
 * What a starting server printed, for the error if it fails: its first lines and its last. A Go panic names its
 * cause first (`listen tcp ...: bind: address already in use`), then pages of stack: a tail alone lost the
 * cause, and with it the retry on a taken port.
 */
export function startOutput(headChars = 4000, tailChars = 8000): { add(text: string): void; text(): string } {
  let head = '';
  let tail = '';
  let dropped = false;
  return {
    add(text) {
      const room = headChars - head.length;
      if (room > 0) {
        head += text.slice(0, room);
        text = text.slice(room);
      }
      const joined = tail + text;
      if (joined.length > tailChars) dropped = true;
      tail = joined.slice(-tailChars);
    },
    text: () => (dropped ? `${head}\n...\n${tail}` : head + tail),
  };
}

/** The port a failed start could not bind, from the server's `listen tcp 127.0.0.1:N: bind: address already in use`. */
export function takenPort(output: string): number | undefined {
  const match = /listen tcp [^\s]*:(\d+): bind: address already in use/i.exec(output);
  return match ? Number(match[1]) : undefined;
}

async function launch(
  cliPath: string,
  options: DevServerOptions,
  log: (m: string) => void,
): Promise<DevServer> {
  const namespace = options.namespace ?? 'default';
  const port = options.port ?? (await freePort());
  const uiPort = options.uiPort ?? (await freePort());
  const dbFile = options.dbFile === ':memory:' ? undefined : resolve(options.dbFile ?? DEFAULT_DB_FILE);
  const dbExisted = dbFile !== undefined && existsSync(dbFile);
  if (dbFile) await mkdir(dirname(dbFile), { recursive: true });

  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--http-port',
    String(await freePort()),
    '--metrics-port',
    String(await freePort()),
    '--namespace',
    namespace,
    '--log-level',
    'warn',
    ...SEARCH_ATTRIBUTES.flatMap(({ name, type }) => ['--search-attribute', `${name}=${type}`]),
    ...Object.entries(DEV_SERVER_DYNAMIC_CONFIG).flatMap(([k, v]) => ['--dynamic-config-value', `${k}=${v}`]),
    ...(dbFile ? ['--db-filename', dbFile] : []),
    ...(options.headless ? ['--headless'] : ['--ui-port', String(uiPort)]),
  ];
  const child = spawn(cliPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const output = startOutput();
  const keep = (chunk: Buffer) => output.add(chunk.toString());
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  // A dev server must never outlive the process that started it.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

  const address = `127.0.0.1:${port}`;
  const uiUrl = options.headless ? undefined : `http://127.0.0.1:${uiPort}`;
  const stop = async () => {
    process.removeListener('exit', killOnExit);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    await waitUntilReady(address, child, () => output.text(), options.readyTimeoutMs ?? 60_000);
    if (dbExisted) await registerSearchAttributes(cliPath, address, namespace);
    if (uiUrl) await waitForHttp(uiUrl, options.readyTimeoutMs ?? 60_000);
  } catch (err) {
    await stop();
    throw err;
  }
  log(`Temporal dev server ready at ${address}${uiUrl ? `, Web UI ${uiUrl}` : ''}`);
  return { address, namespace, uiUrl, dbFile, cliPath, process: child, stop };
}
