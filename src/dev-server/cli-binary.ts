// Finds or provisions the Temporal CLI (dev server + Web UI). The SDK's own download needs the internet,
// which many build machines lack, so we also build it from the Go module proxy and cache the result.
import { execFile, spawn } from 'node:child_process';
import { access, constants, mkdir, readdir, rename, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { TemporalCliNotFoundError } from '../errors';

/** v1.5.1 is the newest CLI release whose go.mod has no `replace` directive, which `go install pkg@v` requires. */
export const TEMPORAL_CLI_VERSION = 'v1.5.1';
const GO_PACKAGE = 'github.com/temporalio/cli/cmd/temporal';

export interface FindCliOptions {
  env?: NodeJS.ProcessEnv;
  /** Where provisioned copies live; default `$XDG_CACHE_HOME/vidbatch` or `~/.cache/vidbatch`. */
  cacheDir?: string;
  log?: (message: string) => void;
  /** Set false to only look, never build or download. */
  provision?: boolean;
}

export interface FoundCli {
  path: string;
  source: 'TEMPORAL_CLI_PATH' | 'PATH' | 'cache' | 'go install' | 'sdk download';
}

export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'vidbatch');
}

async function isExecutable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

async function onPath(name: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  for (const dir of (env.PATH ?? '').split(delimiter).filter(Boolean)) {
    const candidate = join(dir, name);
    if (await isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/** Builds the CLI with `go install` into a staging dir, then renames it into place so a killed build leaves no half binary. */
async function goInstall(
  targetDir: string,
  env: NodeJS.ProcessEnv,
  log: (m: string) => void,
): Promise<string> {
  const go =
    (await onPath('go', env)) ??
    ((await isExecutable('/usr/local/go/bin/go')) ? '/usr/local/go/bin/go' : undefined);
  if (!go) throw new Error('the Go toolchain is not installed');
  const staging = `${targetDir}.partial-${process.pid}`;
  await mkdir(staging, { recursive: true });
  log(
    `Building the Temporal CLI ${TEMPORAL_CLI_VERSION} with ${go} (first time only; this takes a few minutes)...`,
  );
  const started = Date.now();
  await new Promise<void>((resolve, reject) => {
    const child = spawn(go, ['install', `${GO_PACKAGE}@${TEMPORAL_CLI_VERSION}`], {
      env: { ...env, GOBIN: staging, GOFLAGS: env.GOFLAGS ?? '-mod=mod' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`go install exited with ${code}: ${stderr.trim()}`)),
    );
  });
  await mkdir(targetDir, { recursive: true });
  const target = join(targetDir, 'temporal');
  await rename(join(staging, 'temporal'), target);
  log(`Built the Temporal CLI in ${Math.round((Date.now() - started) / 1000)} s: ${target}`);
  return target;
}

/** Lets the SDK download its dev server into our cache (works only with internet access), then returns that file. */
async function sdkDownload(dir: string): Promise<string | undefined> {
  const { TestWorkflowEnvironment } = await import('@temporalio/testing');
  await mkdir(dir, { recursive: true });
  const env = await TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'cached-download', downloadDir: dir } },
  });
  await env.teardown();
  for (const name of await readdir(dir)) {
    if (await isExecutable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/**
 * Returns a Temporal CLI, trying in order: TEMPORAL_CLI_PATH, `temporal` on PATH, a copy cached earlier,
 * a `go install` build into the cache, and the SDK's own cached download.
 */
export async function findTemporalCli(options: FindCliOptions = {}): Promise<FoundCli> {
  const env = options.env ?? process.env;
  const log = options.log ?? ((m: string) => console.error(m));
  const cacheRoot = options.cacheDir ?? defaultCacheDir(env);
  const goDir = join(cacheRoot, 'temporal-cli', TEMPORAL_CLI_VERSION);
  const sdkDir = join(cacheRoot, 'temporal-cli', 'sdk-download');
  const tried: string[] = [];

  const explicit = env.TEMPORAL_CLI_PATH;
  if (explicit) {
    if (await isExecutable(explicit)) return { path: explicit, source: 'TEMPORAL_CLI_PATH' };
    tried.push(`TEMPORAL_CLI_PATH=${explicit} is not an executable file`);
  } else tried.push('TEMPORAL_CLI_PATH is not set');

  const fromPath = await onPath('temporal', env);
  if (fromPath) return { path: fromPath, source: 'PATH' };
  tried.push('no `temporal` on PATH');

  for (const cached of [join(goDir, 'temporal'), ...(await listExecutables(sdkDir))]) {
    if (await isExecutable(cached)) return { path: cached, source: 'cache' };
  }
  tried.push(`nothing cached under ${join(cacheRoot, 'temporal-cli')}`);

  if (options.provision === false) throw new TemporalCliNotFoundError(tried);

  try {
    return { path: await goInstall(goDir, env, log), source: 'go install' };
  } catch (err) {
    tried.push(`go install ${GO_PACKAGE}@${TEMPORAL_CLI_VERSION} failed: ${(err as Error).message}`);
  }
  try {
    log('Trying the Temporal SDK download of the dev server...');
    const downloaded = await sdkDownload(sdkDir);
    if (downloaded) return { path: downloaded, source: 'sdk download' };
    tried.push('the SDK download produced no executable');
  } catch (err) {
    tried.push(`the SDK download failed: ${(err as Error).message.split('\n')[0]}`);
  }
  throw new TemporalCliNotFoundError(tried);
}

async function listExecutables(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).map((name) => join(dir, name));
  } catch {
    return [];
  }
}

/** Runs the CLI once and returns its stdout; used for operator commands such as search-attribute registration. */
export async function runCli(cli: string, args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(cli, args, { timeout: 30_000 });
  return stdout;
}
