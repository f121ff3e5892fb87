// Faults that hit a /v1 request before it is processed: an injected 429, a 503, a reset connection. Nothing
// happened at the gateway, so a client may safely send again. `scope` picks which requests they hit.
import type { IncomingMessage } from 'node:http';
import { HttpError } from './http';
import { tooMany } from './rate-limits';
import type { SimulatorState } from './state';
import { routeKind } from './video-job-routes';

/** Whether the request faults may hit this request (the fault `scope`). */
export function inFaultScope(state: SimulatorState, method: string | undefined, path: string): boolean {
  const { scope } = state.faults;
  return scope === 'all' || scope === routeKind(method, path);
}

/**
 * Rolls the faults before processing: throws the 429 or 503, or resets the connection and returns false.
 * True: the request goes on.
 */
export function beforeProcessing(state: SimulatorState, req: IncomingMessage, faulty: boolean): boolean {
  if (faulty && state.roll('error429')) {
    throw tooMany(state, 'injected', 'rate_limited', 'Rate limit exceeded.', 1000);
  }
  if (faulty && state.roll('error5xx'))
    throw new HttpError(503, 'unavailable', 'The service is temporarily unavailable.');
  if (faulty && state.roll('resetBefore')) {
    req.socket.destroy();
    return false;
  }
  return true;
}
