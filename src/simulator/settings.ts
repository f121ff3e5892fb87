// The simulator's options: what startSimulator takes, the part that can change at runtime (setOptions,
// POST /admin/options) and its validation.
import { z } from 'zod';
import type { FaultOptions } from './fault-settings';

export interface SimulatorOptions {
  host?: string;
  port?: number;
  /** Keys registered at start (each must start with `sk-`). */
  apiKeys?: string[];
  /** Mean job latency and its ± jitter, in seconds. */
  jobSeconds?: number;
  jobJitterSeconds?: number;
  /** Requests per second per key over all /v1 endpoints; 0 disables. */
  rateLimit?: number;
  /** Bucket size; default max(1, rateLimit). */
  burst?: number;
  /** Jobs per key not yet finished; 0 disables. */
  maxRunningJobs?: number;
  retryAfterFormat?: 'seconds' | 'date';
  /** Result URLs stop working (403, as object stores answer) this long after they were issued; 0 = never. */
  urlTtlSeconds?: number;
  /**
   * A status check of a completed job whose URL has expired answers a new URL (a new token in its path) that
   * works for another `urlTtlSeconds`, as providers that sign URLs do. Default false: the expired URL again.
   */
  freshUrlOnCheck?: boolean;
  /**
   * Result URLs answer `302 Found` to another path (`/cdn/...`) that serves the video, as an object store
   * sends to its CDN: true or 1 is one hop, 2 a chain of two, up to 5. Default false (0).
   */
  redirectResults?: boolean | number;
  /** A job's status query answers 404 this long after the job finished (the gateway forgot it); 0 = never. */
  jobTtlSeconds?: number;
  /**
   * Publish the key's rate limit in every answer's `RateLimit-Policy` header (the IETF draft's shape,
   * `"default";q=<burst>;w=<burst / rateLimit>`), as some gateways do; the spec shows none, so off by default.
   */
  publishRateLimit?: boolean;
  /**
   * Honour Idempotency-Key (default false). The spec never mentions the header, so the faithful default is
   * that every POST makes a new, billable job; true replays the first job for a repeated key.
   */
  idempotency?: boolean;
  /** Until this time (epoch ms or Date) every /v1 request gets 429 with a Retry-After pointing at it. */
  holdUntil?: number | Date;
  faults?: Partial<FaultOptions>;
  seed?: number;
  now?: () => number;
  /** Keep a log of every /v1 request (time, route, status, Retry-After) for tests that check timing. */
  recordRequests?: boolean;
  /** Keep keys and jobs in this JSON file, so a restarted simulator still knows earlier jobs. */
  stateFile?: string;
}

/** The options that can change at runtime (`setOptions`, POST /admin/options). */
export type RuntimeOptions = Pick<
  Required<SimulatorOptions>,
  | 'jobSeconds'
  | 'jobJitterSeconds'
  | 'rateLimit'
  | 'burst'
  | 'maxRunningJobs'
  | 'retryAfterFormat'
  | 'urlTtlSeconds'
  | 'freshUrlOnCheck'
  | 'jobTtlSeconds'
  | 'publishRateLimit'
  | 'idempotency'
> & {
  /** Redirect hops before a result URL serves the video; 0 = none. */
  redirectResults: number;
};

/** The most redirect hops a result URL may chain (downloaders commonly follow 5 at most). */
export const MAX_REDIRECT_HOPS = 5;

/** `redirectResults` as a number of hops: true is one, false none. */
export const redirectHops = (value: boolean | number | undefined): number =>
  value === true ? 1 : value === false || value === undefined ? 0 : value;

/** What setOptions and POST /admin/options accept. */
export const runtimeOptionsSchema = z
  .strictObject({
    jobSeconds: z.number().min(0),
    jobJitterSeconds: z.number().min(0),
    rateLimit: z.number().min(0),
    burst: z.number().min(0),
    maxRunningJobs: z.number().int().min(0),
    retryAfterFormat: z.enum(['seconds', 'date']),
    urlTtlSeconds: z.number().min(0),
    freshUrlOnCheck: z.boolean(),
    redirectResults: z
      .union([z.boolean(), z.number().int().min(0).max(MAX_REDIRECT_HOPS)])
      .transform(redirectHops),
    jobTtlSeconds: z.number().min(0),
    publishRateLimit: z.boolean(),
    idempotency: z.boolean(),
  })
  .partial();

/** What setOptions and POST /admin/options take (`redirectResults` may be a boolean there). */
export type RuntimeOptionsInput = z.input<typeof runtimeOptionsSchema>;

/** "path: message" of a zod error's first issue. */
export function formatIssue(error: z.ZodError): string {
  const first = error.issues[0];
  return `${first?.path.join('.') || 'body'}: ${first?.message ?? 'invalid'}`;
}

/** Drops undefined fields, so an absent setting keeps its current value. */
export const defined = <T extends object>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
