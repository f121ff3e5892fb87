// Other providers' dialects on the one simulator, each under its own path prefix (fal's queue at /fal/...,
// Replicate's predictions at /replicate/v1/...), over the Model Gateway's keys, jobs, limits and faults: a
// request goes through the key check (in the dialect's scheme), the hold and rate limit, the faults before
// processing, the dialect's route, then the lost-answer faults, and is counted under its route template. So
// every spend-safety scenario of /v1 can be run against each dialect, and `jobsCreated` counts all of them.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseRetryAfter } from '../gateway/retry-after';
import type { Dialect } from './dialect-common';
import { authenticateSecret } from './dialect-common';
import { falDialect } from './fal-routes';
import { HttpError, send, type RouteContext } from './http';
import { answerV1 } from './lost-answers';
import { checkLimits } from './rate-limits';
import { beforeProcessing } from './request-faults';
import { replicateDialect } from './replicate-routes';

const DIALECTS: readonly Dialect[] = [falDialect, replicateDialect];

/** The dialect serving this path, if any. */
export function dialectFor(path: string): Dialect | undefined {
  return DIALECTS.find((d) => path.startsWith(d.prefix));
}

/** The status the client saw (0: none), for a request of `dialect`. */
async function answer(
  ctx: RouteContext,
  dialect: Dialect,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<number> {
  const { state } = ctx;
  const path = url.pathname.slice(dialect.prefix.length);
  const key = authenticateSecret(dialect.secret(req.headers.authorization), state);
  checkLimits(state, key.id);
  const { scope } = state.faults;
  const faulty = scope === 'all' || scope === dialect.kind(req.method, path);
  if (!beforeProcessing(state, req, faulty)) return 0;
  const result = await dialect.handle({
    req,
    res,
    path,
    query: url.searchParams,
    key,
    state,
    origin: ctx.origin(),
  });
  if (res.destroyed) return 0; // the client left while the answer was held
  for (const [name, value] of Object.entries(result.headers ?? {})) res.setHeader(name, value);
  return answerV1(state, req, res, result, faulty);
}

/**
 * After a request is answered (`status`, 0 when the client saw none): counts it under `route`, logs it when
 * `logged` and requests are recorded (with the Retry-After of a 429), and has a request that may change
 * something saved. Status checks change counters only; those are saved at close, not rewritten per poll.
 */
export function recordAnswer(
  ctx: RouteContext,
  req: IncomingMessage,
  res: ServerResponse,
  route: string,
  status: number,
  logged: boolean,
): void {
  const { state } = ctx;
  state.countRequest(route, status);
  if (ctx.recordRequests && logged) {
    const wait =
      status === 429 ? parseRetryAfter(String(res.getHeader('retry-after') ?? ''), state.now()) : undefined;
    state.requestLog.push({
      at: state.now(),
      route,
      status,
      ...(wait !== undefined ? { retryAfterMs: wait } : {}),
    });
  }
  if (req.method !== 'GET') ctx.onChange();
}

/** Serves one request of `dialect`; counts, logs and persists it as routes.ts does /v1 requests. */
export function serveDialect(
  ctx: RouteContext,
  dialect: Dialect,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): void {
  const { state } = ctx;
  const route = dialect.route(req.method, url.pathname.slice(dialect.prefix.length));
  void (async () => {
    let status = 500;
    try {
      status = await answer(ctx, dialect, req, res, url);
    } catch (err) {
      const e = err instanceof HttpError ? err : new HttpError(500, 'internal_error', 'Internal error.');
      status = e.status;
      if (!res.headersSent) {
        const { body, headers } = dialect.errorAnswer(e, state);
        send(res, status, body, { ...e.headers, ...headers });
      }
    } finally {
      recordAnswer(ctx, req, res, route, status, true);
    }
  })();
}
