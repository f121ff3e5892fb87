// What the tests of the simulator and of the providers speaking to it share: simulators closed after each test,
// and a request to one with its key in a dialect's scheme.
import { afterEach } from 'vitest';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/server';

/**
 * Starts simulators with `defaults` (each call's options over them), closing them after each test of the file
 * that called it; call it at the top of a test file.
 */
export function simulators(defaults: SimulatorOptions): (options?: SimulatorOptions) => Promise<Simulator> {
  const sims: Simulator[] = [];
  afterEach(async () => {
    while (sims.length) await sims.pop()?.close();
  });
  return async (options = {}) => {
    const sim = await startSimulator({ ...defaults, ...options });
    sims.push(sim);
    return sim;
  };
}

export interface CallInit {
  method?: string;
  /** The key sent; null sends none; the simulator's own by default. */
  key?: string | null;
  /** Sent as it is when a string, else as JSON; with one the method is POST by default, else GET. */
  body?: unknown;
  headers?: Record<string, string>;
  /** The whole Authorization header, in place of the key. */
  auth?: string;
}

/** A request to `url` on simulator `s`, as JSON, with the key as `<scheme> <key>`. */
export function callSimulator(s: Simulator, url: string, init: CallInit = {}, scheme = 'Bearer') {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...init.headers };
  const key = init.key === undefined ? s.apiKey : init.key;
  if (init.auth !== undefined) headers.authorization = init.auth;
  else if (key) headers.authorization = `${scheme} ${key}`;
  return fetch(url, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers,
    body:
      init.body === undefined
        ? undefined
        : typeof init.body === 'string'
          ? init.body
          : JSON.stringify(init.body),
  });
}
