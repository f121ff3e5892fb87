// Spawning the real `vidbatch` command (bin/vidbatch.mjs) the way a user does, for the CLI tests.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { cliSettings, type TestEnv } from './helpers';

export const CLI = fileURLToPath(new URL('../../bin/vidbatch.mjs', import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Settings of this test process that must not leak into a spawned command unless a test passes them. */
const OUTSIDE_SETTINGS = [
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'GATEWAY_BASE_URL',
  'GATEWAY_API_KEY',
  'GATEWAY_API_KEY_FILE',
  'VIDBATCH_TASK_QUEUE',
  'VIDBATCH_DB_FILE',
];

export function cliEnvironment(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of OUTSIDE_SETTINGS) delete env[name];
  return { ...env, ...extra };
}

export interface SpawnOptions {
  cwd: string;
  env?: Record<string, string>;
  /** SIGINT once stderr or stdout matches. */
  interruptWhen?: RegExp;
  /** Another build's bin/vidbatch.mjs (the rolling-upgrade test); default this checkout's. */
  cli?: string;
}

/** Runs `vidbatch ...args` to its end. */
export function vidbatch(args: string[], options: SpawnOptions): Promise<CliRun> {
  const child = spawn(process.execPath, [options.cli ?? CLI, ...args], {
    cwd: options.cwd,
    env: cliEnvironment(options.env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return collect(child, options.interruptWhen);
}

/** Starts `vidbatch ...args` in the background: `output()` so far, `waitFor(pattern)`, `done`, `stop()`. */
export function background(args: string[], options: SpawnOptions) {
  const child = spawn(process.execPath, [options.cli ?? CLI, ...args], {
    cwd: options.cwd,
    env: cliEnvironment(options.env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const done = collect(child);
  return {
    child,
    done,
    output: () => out,
    async waitFor(pattern: RegExp, timeoutMs = 60_000): Promise<RegExpExecArray> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const m = pattern.exec(out);
        if (m) return m;
        if (child.exitCode !== null || Date.now() > deadline)
          throw new Error(`never printed ${pattern} (exit ${child.exitCode}):\n${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop(): Promise<CliRun> {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
      return done;
    },
  };
}

function collect(child: ChildProcess, interruptWhen?: RegExp): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    let interrupted = false;
    const check = () => {
      if (interruptWhen && !interrupted && interruptWhen.test(stdout + stderr)) {
        interrupted = true;
        child.kill('SIGINT');
      }
    };
    child.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString();
      check();
    });
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
      check();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * `vidbatch server` and `workers` × `vidbatch worker` in `dir`, as a user starts them in separate terminals,
 * each ready before this returns; `cleanups` gets how to stop each.
 */
export async function serverAndWorkers(
  dir: string,
  env: Record<string, string>,
  workers: number,
  cleanups: (() => Promise<unknown>)[],
): Promise<void> {
  const server = background(['server'], { cwd: dir });
  cleanups.push(() => server.stop());
  await server.waitFor(/Temporal gRPC address/);
  for (let i = 0; i < workers; i++) {
    const worker = background(['worker'], { cwd: dir, env });
    cleanups.push(() => worker.stop());
    await worker.waitFor(/vidbatch worker polling task queue/);
  }
}

/** The manifest path a finished `run` printed ("Manifest: <path>"). */
export function manifestPathOf(r: CliRun): string {
  const path = /Manifest: (\S+manifest\.jsonl)/.exec(r.stdout)?.[1];
  if (!path) throw new Error(`no manifest in output:\n${r.stdout}\n${r.stderr}`);
  return path;
}

/** Poll flags for the simulator's short jobs: a fixed, quick schedule, so a test sees its jobs end promptly. */
export const FAST_POLL_FLAGS = [
  '--first-poll',
  '0.3',
  '--poll-interval',
  '0.2',
  '--poll-cap',
  '1',
  '--no-adaptive-poll',
];

/** `vidbatch ...args` in a test environment's folder, with its Temporal server, queue and simulator. */
export const vidbatchIn = (e: TestEnv, args: string[]) => vidbatch(args, { cwd: e.dir, env: cliSettings(e) });

/** `vidbatch run <file> ...flags` with FAST_POLL_FLAGS. */
export const runIn = (e: TestEnv, file: string, ...flags: string[]) =>
  vidbatchIn(e, ['run', file, ...flags, ...FAST_POLL_FLAGS]);

/** A command's exit code and output, for an assertion's message. */
export const exitAndOutput = (r: CliRun) => `exit ${r.code}\n${r.stdout}\n${r.stderr}`;
