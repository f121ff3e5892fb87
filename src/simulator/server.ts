// A faithful HTTP simulator of the Model Gateway (shared/seed spec), with the console's key management as an
// admin API, per-key limits and seedable fault injection. Tests, benchmarks and demos talk to it over real HTTP.
// This file starts and stops it (listener, state file); routes.ts answers requests, state.ts holds the model.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequestHandler } from './routes';
import type { FaultOptions } from './fault-settings';
import { redirectHops, type RuntimeOptionsInput, type SimulatorOptions } from './settings';
import { SimulatorState, type StateData } from './state';

export type { FaultOptions } from './fault-settings';
export type { RuntimeOptions, RuntimeOptionsInput, SimulatorOptions } from './settings';

export interface Simulator {
  /** Base URL ending in /v1, as clients configure it. */
  baseUrl: string;
  origin: string;
  /** The key registered at start (the first of `apiKeys`, or a fresh one). */
  apiKey: string;
  state: SimulatorState;
  stats(): ReturnType<SimulatorState['snapshot']>;
  /** Changes fault settings at runtime (throws on unknown fields or out-of-range values). */
  setFaults(faults: Partial<FaultOptions>): void;
  /** Changes limits and behaviour (idempotency, rate limit, TTLs...) at runtime. */
  setOptions(options: RuntimeOptionsInput): void;
  /** Until `until` (epoch ms or Date) every /v1 request gets 429 with Retry-After; undefined releases. */
  hold(until: number | Date | undefined): void;
  /** Closes the listener for `ms`: new connections are refused, open ones are cut. */
  refuseConnections(ms: number): void;
  close(): Promise<void>;
}

export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const state = new SimulatorState({
    jobSeconds: options.jobSeconds ?? 20,
    jobJitterSeconds: options.jobJitterSeconds ?? 0,
    rateLimit: options.rateLimit ?? 0,
    burst: options.burst ?? 0,
    maxRunningJobs: options.maxRunningJobs ?? 0,
    retryAfterFormat: options.retryAfterFormat ?? 'seconds',
    urlTtlSeconds: options.urlTtlSeconds ?? 0,
    freshUrlOnCheck: options.freshUrlOnCheck ?? false,
    redirectResults: redirectHops(options.redirectResults),
    jobTtlSeconds: options.jobTtlSeconds ?? 0,
    publishRateLimit: options.publishRateLimit ?? false,
    idempotency: options.idempotency ?? false,
    faults: options.faults,
    seed: options.seed ?? 1,
    now: options.now,
    holdUntil: options.holdUntil instanceof Date ? options.holdUntil.getTime() : options.holdUntil,
  });
  if (options.stateFile && existsSync(options.stateFile)) {
    state.restore(JSON.parse(readFileSync(options.stateFile, 'utf8')) as StateData);
  }
  const save = () => {
    clearTimeout(saveTimer);
    saveTimer = undefined;
    if (options.stateFile) writeFileSync(options.stateFile, JSON.stringify(state.persistable()));
  };
  // At most one write per 500 ms: rewriting the whole file per request would be quadratic in a big batch.
  let saveTimer: NodeJS.Timeout | undefined;
  const scheduleSave = () => {
    if (options.stateFile) saveTimer ??= setTimeout(save, 500);
  };
  const initialKeys = options.apiKeys?.length ? options.apiKeys : [undefined];
  const registered = initialKeys.map(
    (key, i) =>
      (key ? state.findKey(key) : undefined) ?? state.createKey(`initial key ${i + 1}`, undefined, key),
  );

  const host = options.host ?? '127.0.0.1';
  let origin = '';
  let closed = false;
  let reopenTimer: NodeJS.Timeout | undefined;
  const server = createServer();
  const stopListening = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  const refuseConnections = (ms: number) => {
    clearTimeout(reopenTimer);
    const stopped = server.listening ? stopListening() : Promise.resolve();
    const port = Number(new URL(origin).port);
    reopenTimer = setTimeout(() => {
      void stopped.then(() => {
        if (!closed && !server.listening) server.listen(port, host);
      });
    }, ms);
  };
  server.on(
    'request',
    createRequestHandler({
      state,
      origin: () => origin,
      recordRequests: Boolean(options.recordRequests),
      onChange: scheduleSave,
      refuseConnections,
    }),
  );

  await new Promise<void>((resolve) => server.listen(options.port ?? 0, host, resolve));
  const { port } = server.address() as AddressInfo;
  origin = `http://${host}:${port}`;
  return {
    baseUrl: `${origin}/v1`,
    origin,
    apiKey: registered[0]!.key,
    state,
    stats: () => state.snapshot(),
    setFaults: (faults) => void state.setFaults(faults),
    setOptions: (o) => void state.setOptions(o),
    hold: (until) => state.setHold(until),
    refuseConnections,
    close: async () => {
      closed = true;
      clearTimeout(reopenTimer);
      save();
      await stopListening();
    },
  };
}
