// Settings read once from the environment, failing fast with the name of what is missing. Gateway settings
// follow the OpenAI convention (base URL ending in /v1 + key); Temporal's come from its own envconfig.
import { readFileSync, statSync } from 'node:fs';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import { ConfigError } from './errors';
import { DEFAULT_TASK_QUEUE } from './contract/types';

export interface GatewaySettings {
  baseUrl: string;
  /** Called per request, so a key file can be rotated without restarting the worker. */
  apiKey: () => string;
  timeoutMs: number;
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

export function loadGatewaySettings(env: NodeJS.ProcessEnv = process.env): GatewaySettings {
  const rawUrl = env.GATEWAY_BASE_URL?.trim();
  if (!rawUrl) throw new ConfigError('GATEWAY_BASE_URL is not set (the gateway base URL, ending in /v1)');
  const baseUrl = rawUrl.replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+(\/.*)?\/v1$/.test(baseUrl)) {
    throw new ConfigError(`GATEWAY_BASE_URL must be an http(s) URL ending in /v1, got "${rawUrl}"`);
  }
  let apiKey: () => string;
  if (env.GATEWAY_API_KEY_FILE) apiKey = keyFromFile(env.GATEWAY_API_KEY_FILE);
  else if (env.GATEWAY_API_KEY?.trim()) {
    const key = env.GATEWAY_API_KEY.trim();
    apiKey = () => key;
  } else
    throw new ConfigError(
      'GATEWAY_API_KEY is not set (or set GATEWAY_API_KEY_FILE to a file holding the key)',
    );
  const timeoutMs = Number(env.GATEWAY_TIMEOUT_MS ?? 20_000);
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
    throw new ConfigError('GATEWAY_TIMEOUT_MS must be a positive number');
  return { baseUrl, apiKey, timeoutMs };
}

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
