// Request handling of the simulated gateway: routes each request to /v1 (the spec's endpoints, behind the key
// check, hold, rate limit and faults), /admin (admin-routes.ts) or /files and /cdn (result-files.ts), and counts and
// logs what it answered. Every answer carries a unique `x-request-id`, as real gateways send.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { adminRoutes } from './admin-routes';
import { authenticate } from './api-keys';
import { chatRoute } from './chat-route';
import { dialectFor, recordAnswer, serveDialect } from './dialect-server';
import {
  errorBody,
  HttpError,
  newRequestId,
  REQUEST_ID_HEADER,
  send,
  type RouteContext,
  type V1Result,
} from './http';
import { answerV1 } from './lost-answers';
import { modelsRoute } from './models-route';
import { noteKeyAtResult, openAiVideosDialect } from './openai-videos-routes';
import { checkLimits } from './rate-limits';
import { beforeProcessing, inFaultScope } from './request-faults';
import { isResultPath, serveFile } from './result-files';
import { videoJobRoutes } from './video-job-routes';

export type { RouteContext } from './http';

export function createRequestHandler(ctx: RouteContext): (req: IncomingMessage, res: ServerResponse) => void {
  const { state } = ctx;

  /** The answer of a /v1 request that got through the checks. */
  const processV1 = async (req: IncomingMessage, path: string, key: ReturnType<typeof authenticate>) => {
    const result: V1Result | undefined =
      (await videoJobRoutes(req, path, key, state, ctx.origin())) ??
      modelsRoute(req.method, path, key) ??
      (await chatRoute(req, path, key, state));
    if (!result) throw new HttpError(404, 'not_found', `No route for ${req.method} ${path}.`);
    return result;
  };

  /** Handles one /v1 request: key, hold, rate limit, faults before processing, processing, answer. */
  const serveV1 = async (req: IncomingMessage, res: ServerResponse, path: string): Promise<number> => {
    const key = authenticate(req, state.keyRing, state.stats);
    checkLimits(state, key.id);
    const faulty = inFaultScope(state, req.method, path);
    if (!beforeProcessing(state, req, faulty)) return 0;
    return answerV1(state, req, res, await processV1(req, path, key), faulty);
  };

  return (req, res) => {
    // Set before anything is written, so every answer carries it, errors included.
    res.setHeader(REQUEST_ID_HEADER, newRequestId());
    const { publishRateLimit, rateLimit, burst } = state.options;
    if (publishRateLimit && rateLimit > 0) {
      const quota = burst > 0 ? burst : Math.max(1, rateLimit);
      res.setHeader('ratelimit-policy', `"default";q=${quota};w=${quota / rateLimit}`);
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname;
    // fal's queue (/fal/) and Replicate's predictions (/replicate/v1/), over the same jobs (dialect-server.ts).
    const dialect = dialectFor(path);
    if (dialect) return serveDialect(ctx, dialect, req, res, url);
    // The OpenAI Videos dialect (/openai/v1/) likewise; a key that reaches a result file is counted there.
    if (path.startsWith(openAiVideosDialect.prefix))
      return serveDialect(ctx, openAiVideosDialect, req, res, url);
    if (isResultPath(path)) noteKeyAtResult(state, req);
    const route = `${req.method} ${path
      .replace(/^\/v1\/videos\/generations\/[^/]+$/, '/v1/videos/generations/{id}')
      .replace(/^\/admin\/keys\/[^/]+/, '/admin/keys/{id}')
      .replace(/^\/admin\/jobs\/[^/]+$/, '/admin/jobs/{id}')
      .replace(/^\/(files|cdn)\/.*$/, '/$1/{file}')}`;
    const isV1 = path.startsWith('/v1/');
    void (async () => {
      let status = 500;
      try {
        if (isResultPath(path)) {
          status = serveFile(state, res, path, url.searchParams);
        } else if (path.startsWith('/admin/')) {
          const answer = await adminRoutes(ctx, req, path);
          status = answer.status;
          if (answer.after) res.once('finish', answer.after);
          send(res, answer.status, answer.body);
        } else if (isV1) {
          status = await serveV1(req, res, path);
        } else {
          throw new HttpError(404, 'not_found', `No route for ${req.method} ${path}.`);
        }
      } catch (err) {
        const e = err instanceof HttpError ? err : new HttpError(500, 'internal_error', 'Internal error.');
        status = e.status;
        if (!res.headersSent) send(res, status, errorBody(e.code, e.message), e.headers);
      } finally {
        recordAnswer(ctx, req, res, route, status, isV1);
      }
    })();
  };
}
