// HTTP plumbing shared by the simulator's routes: errors that become JSON error bodies (spec section 7's
// shape), reading and validating bodies, sending answers.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import { formatIssue } from './settings';
import type { Job } from './jobs';
import type { SimulatorState } from './state';

/** A refusal: answered with `status` and `{ error: { code, message, type } }`. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** What the request handler needs from the server around it. */
export interface RouteContext {
  state: SimulatorState;
  /** Scheme, host and port, for result URLs (known only once the server listens). */
  origin: () => string;
  recordRequests: boolean;
  /** Called after every request that may have changed keys or jobs (to persist them). */
  onChange: () => void;
  /** Refuses connections for `ms` (the listener is closed, so clients get ECONNREFUSED). */
  refuseConnections: (ms: number) => void;
}

/** What a processed /v1 request answers, and which job it concerns, to track what reached the client. */
export interface V1Result {
  status: number;
  body: unknown;
  job?: Job;
  /** The request created (and billed) this job. */
  created?: boolean;
  /** The answer carries the job's URL. */
  carriesResult?: boolean;
}

export const REQUEST_ID_HEADER = 'x-request-id';

/** A fresh id for one request, sent back in `x-request-id` so a client can quote it. */
export function newRequestId(): string {
  return `req_${randomBytes(12).toString('hex')}`;
}

export function isLoopback(req: IncomingMessage): boolean {
  const a = req.socket.remoteAddress ?? '';
  return a === '127.0.0.1' || a === '::1' || a === '::ffff:127.0.0.1';
}

export async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text) throw new HttpError(400, 'invalid_request', 'The request body is required.');
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 'invalid_json', 'The request body is not valid JSON.');
  }
}

export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  throw new HttpError(400, 'invalid_request', formatIssue(parsed.error));
}

/** Applies a runtime setter, turning its validation error into a 400. */
export function settle<T>(apply: () => T): T {
  try {
    return apply();
  } catch (err) {
    throw new HttpError(400, 'invalid_request', (err as Error).message);
  }
}

export const errorBody = (code: string, message: string) => ({ error: { code, message, type: 'error' } });

export function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
  text?: string,
) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(text ?? JSON.stringify(body));
}

/** Resolves true if the client went away (closed its connection) before `ms` passed, else false. */
export function waitUnlessClosed(res: ServerResponse, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const onClose = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      res.off('close', onClose);
      resolve(res.destroyed);
    }, ms);
    res.once('close', onClose);
  });
}
