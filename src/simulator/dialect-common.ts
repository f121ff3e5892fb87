// What every other provider's dialect (fal-routes.ts, replicate-routes.ts) shares: the shape of a dialect, the
// key check in a dialect's own scheme, and ending a job early (a cancel, a deadline). The jobs themselves are the
// Model Gateway's (jobs.ts): one account, one set of counters, whatever dialect made them.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { authenticate, type ApiKeyRecord } from './api-keys';
import type { HttpError, V1Result } from './http';
import type { Job } from './jobs';
import type { SimulatorState } from './state';

/** Which requests a fault `scope` of `submit` or `status` hits. */
export type RouteKind = 'submit' | 'status' | 'other';

/** A processed request's answer, with the headers of this answer only. */
export interface DialectResult extends V1Result {
  headers?: Record<string, string>;
}

/** What a dialect's route gets for one request that passed the key check, the limits and the early faults. */
export interface DialectRequest {
  req: IncomingMessage;
  /** For a route that holds its answer (Replicate's `Prefer: wait`) and must know if the client left. */
  res: ServerResponse;
  /** The path below the dialect's prefix, e.g. `fal-ai/wan-25-preview/requests/vid_x/status`. */
  path: string;
  query: URLSearchParams;
  key: ApiKeyRecord;
  state: SimulatorState;
  /** Scheme, host and port of the simulator, for the URLs answers carry. */
  origin: string;
}

export interface Dialect {
  /** The path prefix it is served under, with both slashes: `/fal/`. */
  prefix: string;
  /** The secret of an Authorization header in this dialect's scheme, or undefined. */
  secret(authorization: string | undefined): string | undefined;
  /** The route template the counters file a request under, e.g. `GET /fal/{app}/requests/{id}/status`. */
  route(method: string | undefined, path: string): string;
  kind(method: string | undefined, path: string): RouteKind;
  handle(request: DialectRequest): Promise<DialectResult>;
  /** A refusal (key, limits, faults, bad request) as this dialect words it. */
  errorAnswer(error: HttpError, state: SimulatorState): { body: unknown; headers?: Record<string, string> };
}

/** The secret after `<scheme> ` in an Authorization header, or undefined. */
export function schemeSecret(scheme: string, authorization: string | undefined): string | undefined {
  const match = new RegExp(`^${scheme}\\s+(\\S+)$`, 'i').exec(authorization ?? '');
  return match?.[1];
}

/**
 * The key check of api-keys.ts for a secret sent in another scheme: the same 401s and 403s, counted in the same
 * counters (unknown, missing, deleted, disabled keys), as if it had come as `Bearer`.
 */
export function authenticateSecret(secret: string | undefined, state: SimulatorState): ApiKeyRecord {
  const asBearer = { headers: { authorization: secret ? `Bearer ${secret}` : '' } };
  return authenticate(asBearer as unknown as IncomingMessage, state.keyRing, state.stats);
}

/**
 * Ends an unfinished job at `at` with a failure `code` (a cancel, a deadline): it stops where it is, so a job
 * that had not started never runs. Returns false for a job that had already finished.
 */
export function endJob(
  state: SimulatorState,
  job: Job,
  code: string,
  message: string,
  at = state.now(),
): boolean {
  if (job.doneAt <= at) return false;
  job.outcome = { status: 'failed', code, message };
  job.doneAt = at;
  job.startsAt = Math.min(job.startsAt, at);
  return true;
}

/** A job that belongs to one of these models, by id: other dialects' jobs are another account's. */
export function jobOf(state: SimulatorState, id: string, owns: (model: string) => boolean): Job | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(id);
  } catch {
    return undefined;
  }
  const job = state.jobs.get(decoded);
  return job && owns(job.model) ? job : undefined;
}

export const iso = (ms: number) => new Date(Math.floor(ms)).toISOString();
