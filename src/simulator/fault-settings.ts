// The fault settings: per-request and per-job probabilities, prompt words that force a fault, and where the
// request faults hit. Validated the same way at start, by setFaults and by POST /admin/faults.
import { z } from 'zod';

/** Faults that can be rolled per request; each field is a probability in [0, 1]. */
export interface FaultProbabilities {
  /** A /v1 request gets 503 without being processed. */
  error5xx: number;
  /** The connection is reset before the request is processed (nothing happened at the gateway). */
  resetBefore: number;
  /** A /v1 request gets 429 `rate_limited` without being processed (Retry-After >= `retryAfterMinSeconds`). */
  error429: number;
  /** The response is delayed by `slowMs`, after the request was processed (a job may exist). */
  slow: number;
  /** The connection is dropped after the request was processed (a job may exist). */
  drop: number;
  /** The response is 2xx with an unreadable JSON body, after the request was processed. */
  malformed: number;
  /** 502, after the request was processed (a proxy lost the upstream answer). */
  error502After: number;
  /** 504, after the request was processed (a proxy timed out while the upstream went on). */
  error504After: number;
  /**
   * 500 `text/html` from a misconfigured proxy whose page prints the request's headers verbatim, Authorization
   * included, after the request was processed (a submit may have made a job).
   */
  echoHeaders500: number;
  /** A status query of an unfinished job reports a status outside the documented set. */
  unknownStatus: number;
  /** A job ends as failed with `generation_failed`. */
  jobFailure: number;
  /** A job answers `completed` with no `data[].url` on every status query (rolled once per job). */
  jobNoUrl: number;
  /** Every status query of a job answers HTTP 500 (rolled once per job). */
  jobError5xx: number;
  /**
   * fal: a cancel of a running request is answered CANCELLATION_REQUESTED, but its app ignores it: the job runs
   * on, completes and bills (fal-routes.ts).
   */
  cancelIgnored: number;
  /** A completed job's file is cut short (rolled once per job; video-faults.ts). */
  videoTruncated: number;
  /** A completed job's video has another resolution than asked (rolled once per job). */
  videoWrongResolution: number;
  /** A completed job's video has another duration than asked (rolled once per job). */
  videoWrongDuration: number;
  /** A chat completion gets 429 `rate_limited` with Retry-After (chat-route.ts). */
  chatError429: number;
  /** A chat completion gets 500. */
  chatError500: number;
  /** A chat completion answers 200 with `content: ""`. */
  chatEmpty: number;
  /** A chat completion answers 200 with no `content` in its message. */
  chatMissing: number;
}

export type FaultKind = keyof FaultProbabilities;

/** The request faults that hit after processing: on a submit that made a job, the client cannot learn its id. */
export const AFTER_PROCESSING_FAULTS = [
  'slow',
  'drop',
  'malformed',
  'error502After',
  'error504After',
  'echoHeaders500',
] as const;
export type AfterProcessingFault = (typeof AFTER_PROCESSING_FAULTS)[number];

export interface FaultOptions extends FaultProbabilities {
  slowMs: number;
  /** Prompts containing any of these words (case-insensitive) end as failed with `content_moderation`. */
  moderationWords: string[];
  /**
   * Prompts containing any of these words (case-insensitive) make a job the gateway has forgotten: every status
   * query answers 404 (`goneWords`), or 200 with the status `UNKNOWN` (`unknownStatusWords`), as one provider
   * answers for tasks past their 24 h.
   */
  goneWords: string[];
  unknownStatusWords: string[];
  /** Prompts containing any of these words (case-insensitive) get a truncated, wrong-resolution or wrong-duration video. */
  truncatedWords: string[];
  wrongResolutionWords: string[];
  wrongDurationWords: string[];
  /**
   * Chat completions whose last message contains any of these words (case-insensitive): 429 with Retry-After
   * on the first call for that text only (so a client that waits gets through), 500 on every call, an empty
   * `content`, or no `content` at all.
   */
  chat429Words: string[];
  chat500Words: string[];
  chatEmptyWords: string[];
  chatMissingWords: string[];
  /** Which /v1 requests the request faults hit: all, only job submissions, or only status queries. */
  scope: 'all' | 'submit' | 'status';
  /** Every 429 (rate limit, running-jobs cap, injected) carries a Retry-After of at least this many seconds. */
  retryAfterMinSeconds: number;
}

export const DEFAULT_FAULTS: FaultOptions = {
  error5xx: 0,
  resetBefore: 0,
  error429: 0,
  slow: 0,
  slowMs: 30_000,
  drop: 0,
  malformed: 0,
  error502After: 0,
  error504After: 0,
  echoHeaders500: 0,
  unknownStatus: 0,
  moderationWords: [],
  goneWords: [],
  unknownStatusWords: [],
  jobFailure: 0,
  jobNoUrl: 0,
  jobError5xx: 0,
  cancelIgnored: 0,
  videoTruncated: 0,
  videoWrongResolution: 0,
  videoWrongDuration: 0,
  truncatedWords: [],
  wrongResolutionWords: [],
  wrongDurationWords: [],
  chatError429: 0,
  chatError500: 0,
  chatEmpty: 0,
  chatMissing: 0,
  chat429Words: [],
  chat500Words: [],
  chatEmptyWords: [],
  chatMissingWords: [],
  scope: 'all',
  retryAfterMinSeconds: 0,
};

const probability = z.number().min(0).max(1);

/** What setFaults and POST /admin/faults accept: any subset of the fault settings, nothing unknown. */
export const faultsSchema = z
  .strictObject({
    error5xx: probability,
    resetBefore: probability,
    error429: probability,
    slow: probability,
    drop: probability,
    malformed: probability,
    error502After: probability,
    error504After: probability,
    echoHeaders500: probability,
    unknownStatus: probability,
    jobFailure: probability,
    jobNoUrl: probability,
    jobError5xx: probability,
    cancelIgnored: probability,
    videoTruncated: probability,
    videoWrongResolution: probability,
    videoWrongDuration: probability,
    chatError429: probability,
    chatError500: probability,
    chatEmpty: probability,
    chatMissing: probability,
    chat429Words: z.array(z.string()),
    chat500Words: z.array(z.string()),
    chatEmptyWords: z.array(z.string()),
    chatMissingWords: z.array(z.string()),
    slowMs: z.number().min(0),
    moderationWords: z.array(z.string()),
    goneWords: z.array(z.string()),
    unknownStatusWords: z.array(z.string()),
    truncatedWords: z.array(z.string()),
    wrongResolutionWords: z.array(z.string()),
    wrongDurationWords: z.array(z.string()),
    scope: z.enum(['all', 'submit', 'status']),
    retryAfterMinSeconds: z.number().min(0),
  })
  .partial();
