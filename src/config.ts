// Settings read once from the environment, failing fast with the name of what is missing. Gateway settings
// name the provider's dialect (GATEWAY_PROVIDER), its base URL (as that dialect wants it: the Model Gateway's
// ends in /v1) and the key; Temporal's come from its own envconfig.
import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import type { PathRoots } from './activities/paths';
import { ConfigError } from './errors';
import { DEFAULT_TASK_QUEUE } from './contract/task-queue';
import type { ProviderAdapter } from './gateway/provider';
import { DEFAULT_PROVIDER, PROVIDERS, providerNamed } from './gateway/providers';

export interface GatewaySettings {
  baseUrl: string;
  /** The provider's dialect (GATEWAY_PROVIDER); absent: the Model Gateway's. */
  provider?: ProviderAdapter;
  /**
   * The account money is spent on (gatewayTarget): what batches, task queues and requests are keyed by. Never
   * the key, which is a credential that rotates. Set by loadGatewaySettings; settings made by hand (tests) have
   * their base URL's.
   */
  target?: string;
  /** Called per request, so a key file can be rotated without restarting the worker. */
  apiKey: () => string;
  /** Longest wait for the answer to a status or models call (GATEWAY_TIMEOUT_MS, default 20 s). */
  timeoutMs: number;
  /**
   * Longest wait for a submit's answer before its outcome counts as unknown (GATEWAY_SUBMIT_TIMEOUT_MS,
   * default 120 s): far longer than a poll, since giving up on a submit may mean paying twice.
   */
  submitTimeoutMs?: number;
}

function keyFromFile(path: string): () => string {
  let cached = { mtimeMs: -1, key: '' };
  return () => {
    const { mtimeMs } = statSync(path);
    if (mtimeMs !== cached.mtimeMs) cached = { mtimeMs, key: readFileSync(path, 'utf8').trim() };
    if (!cached.key) throw new ConfigError(`GATEWAY_API_KEY_FILE (${path}) is empty`);
    return cached.key;
  };
}

/** GATEWAY_PROVIDER's adapter (default: the Model Gateway); an unknown name is a ConfigError. */
export function loadProvider(env: NodeJS.ProcessEnv = process.env): ProviderAdapter {
  const name = env.GATEWAY_PROVIDER?.trim();
  if (!name) return DEFAULT_PROVIDER;
  const provider = providerNamed(name);
  if (!provider)
    throw new ConfigError(
      `GATEWAY_PROVIDER must be one of ${PROVIDERS.map((p) => p.name).join(', ')}, got "${name}"`,
    );
  return provider;
}

export function loadGatewaySettings(env: NodeJS.ProcessEnv = process.env): GatewaySettings {
  const provider = loadProvider(env);
  const byDefault = provider === DEFAULT_PROVIDER;
  const rawUrl = env.GATEWAY_BASE_URL?.trim();
  if (!rawUrl)
    throw new ConfigError(
      `GATEWAY_BASE_URL is not set (the ${byDefault ? 'gateway base URL, ending in /v1' : `${provider.name} base URL, such as ${provider.exampleBaseUrl}`})`,
    );
  const baseUrl = rawUrl.replace(/\/+$/, '');
  const wrong = provider.checkBaseUrl(baseUrl) ?? (URL.canParse(baseUrl) ? undefined : 'must be a URL');
  if (wrong) {
    const which = byDefault ? '' : ` for ${provider.name} (such as ${provider.exampleBaseUrl})`;
    throw new ConfigError(`GATEWAY_BASE_URL ${wrong}${which}, got "${rawUrl}"`);
  }
  let apiKey: () => string;
  if (env.GATEWAY_API_KEY_FILE) {
    apiKey = keyFromFile(env.GATEWAY_API_KEY_FILE);
    // Read once now, so a missing, unreadable or empty secret stops the worker at start, not its first submit.
    try {
      apiKey();
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      const reason = (err as NodeJS.ErrnoException).code ?? String(err);
      throw new ConfigError(
        `GATEWAY_API_KEY_FILE (${env.GATEWAY_API_KEY_FILE}) cannot be read (${reason}): it must name a readable file holding the key`,
      );
    }
  } else if (env.GATEWAY_API_KEY?.trim()) {
    const key = env.GATEWAY_API_KEY.trim();
    apiKey = () => key;
  } else
    throw new ConfigError(
      'GATEWAY_API_KEY is not set (or set GATEWAY_API_KEY_FILE to a file holding the key)',
    );
  const timeoutMs = Number(env.GATEWAY_TIMEOUT_MS ?? 20_000);
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
    throw new ConfigError(
      `GATEWAY_TIMEOUT_MS must be a number of milliseconds > 0, got "${env.GATEWAY_TIMEOUT_MS}"`,
    );
  const submitTimeoutMs = Number(env.GATEWAY_SUBMIT_TIMEOUT_MS ?? DEFAULT_GATEWAY_SUBMIT_TIMEOUT_MS);
  if (!Number.isFinite(submitTimeoutMs) || submitTimeoutMs <= 0)
    throw new ConfigError(
      `GATEWAY_SUBMIT_TIMEOUT_MS must be a number of milliseconds > 0, got "${env.GATEWAY_SUBMIT_TIMEOUT_MS}"`,
    );
  const target = gatewayTarget(baseUrl, env.GATEWAY_ACCOUNT, provider.name);
  return {
    baseUrl,
    target,
    apiKey,
    timeoutMs,
    submitTimeoutMs,
    ...(provider === DEFAULT_PROVIDER ? {} : { provider }),
  };
}

const ACCOUNT_LABEL = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * The target of a gateway: its base URL normalised (scheme and host lower-cased, default port and trailing
 * slashes dropped), plus `#<account>` when GATEWAY_ACCOUNT names one of several accounts behind one URL. A
 * provider other than the default goes in front (`openai-videos+https://host/v1`), so two dialects' batches,
 * queues and request keys never mix; the default's target is the base URL alone, as it always was.
 */
export function gatewayTarget(baseUrl: string, account?: string, provider?: string): string {
  const url = new URL(baseUrl);
  const path = `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, '')}`;
  const normal = provider && provider !== DEFAULT_PROVIDER.name ? `${provider}+${path}` : path;
  const label = account?.trim();
  if (!label) return normal;
  if (!ACCOUNT_LABEL.test(label))
    throw new ConfigError(
      `GATEWAY_ACCOUNT must be 1 to 64 letters, digits, '.', '_' or '-' (a label, never the key), got "${label}"`,
    );
  return `${normal}#${label}`;
}

/**
 * The target this environment's gateway settings name (GATEWAY_BASE_URL, GATEWAY_ACCOUNT, GATEWAY_PROVIDER),
 * without needing a key: what a starter or an operator command that holds no worker pays on, when set.
 * Undefined: none set.
 */
export function environmentTarget(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const baseUrl = env.GATEWAY_BASE_URL?.trim().replace(/\/+$/, '');
  return baseUrl ? gatewayTarget(baseUrl, env.GATEWAY_ACCOUNT, loadProvider(env).name) : undefined;
}

/** The target of settings: theirs, else their base URL's with their provider (settings made by hand). */
export function settingsTarget(settings: GatewaySettings): string {
  return settings.target ?? gatewayTarget(settings.baseUrl, undefined, settings.provider?.name);
}

/**
 * The target of `--simulate`: the folder's simulator, never a paid gateway. A provider other than the default
 * goes in front (`fal+simulate:/...`), as in gatewayTarget: a try-out of each dialect has batches of its own.
 */
export function simulatorTarget(stateFile: string, provider?: string): string {
  const target = `simulate:${resolve(stateFile)}`;
  return provider && provider !== DEFAULT_PROVIDER.name ? `${provider}+${target}` : target;
}

/** The provider a target names in front (`fal+https://...`); undefined: none (the default's, or one by hand). */
export function targetProvider(target: string): string | undefined {
  return /^([^+:/#]+)\+/.exec(target)?.[1];
}

export const DEFAULT_GATEWAY_SUBMIT_TIMEOUT_MS = 120_000;

export interface TemporalSettings {
  /** undefined: no TEMPORAL_ADDRESS, so vidbatch runs its embedded dev server. */
  address: string | undefined;
  namespace: string;
  taskQueue: string;
  connectionOptions: ReturnType<typeof loadClientConnectConfig>['connectionOptions'];
}

export function loadTemporalSettings(env: NodeJS.ProcessEnv = process.env): TemporalSettings {
  const { connectionOptions, namespace } = loadClientConnectConfig({
    overrideEnvVars: env as Record<string, string>,
  });
  return {
    address: env.TEMPORAL_ADDRESS ? connectionOptions.address : undefined,
    namespace: namespace ?? 'default',
    taskQueue: env.VIDBATCH_TASK_QUEUE || DEFAULT_TASK_QUEUE,
    connectionOptions,
  };
}

/** Default time a stopping worker gives running activities to finish before it cancels them. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 30_000;

/** What a stopping worker waits past its longest gateway call: delivering the answer, the jobs journal. */
export const SHUTDOWN_MARGIN_MS = 10_000;

/**
 * How long a stopping worker waits before it gives up (Temporal's `shutdownForceTime`; it then exits 1).
 * Running activities get `graceMs`, then are cancelled; but a gateway call already sent is never aborted (a
 * submit's answer is its job id; without it the row's outcome is unknown and a resend may bill twice), so
 * the worker waits for the longest of them: a submit sent just before the stop answers within
 * GATEWAY_SUBMIT_TIMEOUT_MS, a status check within GATEWAY_TIMEOUT_MS. Plus SHUTDOWN_MARGIN_MS.
 */
export function shutdownForceMs(
  graceMs: number,
  gateway: { timeoutMs: number; submitTimeoutMs?: number },
): number {
  return (
    Math.max(graceMs, gateway.timeoutMs, gateway.submitTimeoutMs ?? gateway.timeoutMs) + SHUTDOWN_MARGIN_MS
  );
}

export interface WorkerSettings {
  /** Root of the per-batch output folders (`<outRoot>/<batchId>`). */
  outRoot: string;
  /** Where the worker's activities may read CSVs and write results and videos. */
  roots: PathRoots;
  /** VIDBATCH_SHUTDOWN_GRACE_MS: how long a stopping worker lets running activities finish on their own. */
  shutdownGraceMs: number;
  /** VIDBATCH_READY_FILE: written while the worker polls, for a container healthcheck. */
  readyFile: string | undefined;
  /** VIDBATCH_STORE: the shared object store (`s3://bucket/prefix`) for batches' CSVs and rows; unset: none. */
  store: string | undefined;
}

/**
 * A worker's own settings. Roots, relative to `cwd`: input VIDBATCH_INPUT_ROOT (default `cwd`) plus the out
 * root (retry-failed writes its CSV there); out VIDBATCH_OUT_ROOT (or `outRoot`, default `out`); downloads
 * VIDBATCH_DOWNLOAD_ROOT (default the out root).
 */
export function loadWorkerSettings(
  env: NodeJS.ProcessEnv = process.env,
  outRoot?: string,
  cwd = process.cwd(),
): WorkerSettings {
  const out = resolve(cwd, outRoot || env.VIDBATCH_OUT_ROOT || 'out');
  const graceText = env.VIDBATCH_SHUTDOWN_GRACE_MS?.trim();
  const shutdownGraceMs = graceText ? Number(graceText) : DEFAULT_SHUTDOWN_GRACE_MS;
  if (!Number.isFinite(shutdownGraceMs) || shutdownGraceMs < 0)
    throw new ConfigError(
      `VIDBATCH_SHUTDOWN_GRACE_MS must be a number of milliseconds >= 0, got "${graceText}"`,
    );
  const store = loadStoreSetting(env);
  return {
    outRoot: out,
    roots: {
      input: [resolve(cwd, env.VIDBATCH_INPUT_ROOT || '.'), out],
      // Batches started with VIDBATCH_STORE keep their results in it.
      out: store ? [out, store] : [out],
      download: [resolve(cwd, env.VIDBATCH_DOWNLOAD_ROOT || out)],
    },
    shutdownGraceMs,
    readyFile: env.VIDBATCH_READY_FILE ? resolve(cwd, env.VIDBATCH_READY_FILE) : undefined,
    store,
  };
}

/** VIDBATCH_STORE checked now, so a bad one stops the process at start with the reason. */
export function loadStoreSetting(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const url = env.VIDBATCH_STORE?.trim();
  if (!url) return undefined;
  parseS3Url(url);
  return url;
}

/** VIDBATCH_STORE's `s3://bucket/prefix` split (the prefix ends in `/` unless empty); throws ConfigError. */
export function parseS3Url(url: string): { bucket: string; prefix: string } {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(url);
  const prefix = (m?.[2] ?? '').replace(/\/+$/, '');
  if (!m || prefix.split('/').some((p) => p === '.' || p === '..' || (prefix && !p)))
    throw new ConfigError(
      `VIDBATCH_STORE must be s3://<bucket>[/<prefix>] (a bucket name of 3 to 63 lowercase letters, digits, dots and hyphens; no empty, . or .. part in the prefix), got "${url}"`,
    );
  return { bucket: m[1]!, prefix: prefix ? `${prefix}/` : '' };
}

/** A Worker Deployment Version: the deployment a worker belongs to and the build of its code. */
export interface WorkerVersion {
  deploymentName: string;
  buildId: string;
}

export interface WorkerVersioning {
  version: WorkerVersion;
  /** VIDBATCH_MAKE_CURRENT (`worker --make-current`): once polling, the worker makes its build current. */
  makeCurrent: boolean;
}

/** Temporal's rule for deployment names and build ids: no `:` (it joins them), not empty, at most 255. */
const VERSION_PART = /^[^:\s]{1,255}$/;

/**
 * A `vidbatch worker`'s Worker Versioning (docs/upgrading.md#worker-versioning): VIDBATCH_DEPLOYMENT_NAME and
 * VIDBATCH_BUILD_ID (`--deployment-name`, `--build-id`), both or neither. Undefined: an unversioned worker.
 */
export function loadWorkerVersioning(env: NodeJS.ProcessEnv = process.env): WorkerVersioning | undefined {
  const deploymentName = env.VIDBATCH_DEPLOYMENT_NAME?.trim() ?? '';
  const buildId = env.VIDBATCH_BUILD_ID?.trim() ?? '';
  const makeCurrent = /^(1|true|yes)$/i.test(env.VIDBATCH_MAKE_CURRENT?.trim() ?? '');
  if (!deploymentName && !buildId) {
    if (makeCurrent)
      throw new ConfigError(
        'VIDBATCH_MAKE_CURRENT (--make-current) needs VIDBATCH_DEPLOYMENT_NAME and VIDBATCH_BUILD_ID (--deployment-name, --build-id)',
      );
    return undefined;
  }
  if (!deploymentName || !buildId)
    throw new ConfigError(
      `Worker Versioning needs both VIDBATCH_DEPLOYMENT_NAME (--deployment-name) and VIDBATCH_BUILD_ID (--build-id); ${deploymentName ? 'VIDBATCH_BUILD_ID' : 'VIDBATCH_DEPLOYMENT_NAME'} is not set`,
    );
  for (const [name, value] of [
    ['VIDBATCH_DEPLOYMENT_NAME', deploymentName],
    ['VIDBATCH_BUILD_ID', buildId],
  ] as const)
    if (!VERSION_PART.test(value))
      throw new ConfigError(`${name} must be 1 to 255 characters with no ':' or spaces, got "${value}"`);
  return { version: { deploymentName, buildId }, makeCurrent };
}
