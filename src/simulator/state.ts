// The simulated gateway's model: API keys, jobs, per-key limits, hold, fault dice and counters. No HTTP here.
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { rollBadAnswer, type BadJobAnswer } from './job-faults';
import { chooseVideoFault, type VideoFault } from './video-faults';

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
  /** A status query of an unfinished job reports a status outside the documented set. */
  unknownStatus: number;
  /** A job ends as failed with `generation_failed`. */
  jobFailure: number;
  /** A job answers `completed` with no `data[].url` on every status query (rolled once per job). */
  jobNoUrl: number;
  /** Every status query of a job answers HTTP 500 (rolled once per job). */
  jobError5xx: number;
  /** A completed job's file is cut short (rolled once per job; video-faults.ts). */
  videoTruncated: number;
  /** A completed job's video has another resolution than asked (rolled once per job). */
  videoWrongResolution: number;
  /** A completed job's video has another duration than asked (rolled once per job). */
  videoWrongDuration: number;
}

export type FaultKind = keyof FaultProbabilities;

/** The request faults that hit after processing: on a submit that made a job, the client cannot learn its id. */
export const AFTER_PROCESSING_FAULTS = [
  'slow',
  'drop',
  'malformed',
  'error502After',
  'error504After',
] as const;
export type AfterProcessingFault = (typeof AFTER_PROCESSING_FAULTS)[number];

export interface FaultOptions extends FaultProbabilities {
  slowMs: number;
  /** Prompts containing any of these words (case-insensitive) end as failed with `content_moderation`. */
  moderationWords: string[];
  /** Prompts containing any of these words (case-insensitive) get a truncated, wrong-resolution or wrong-duration video. */
  truncatedWords: string[];
  wrongResolutionWords: string[];
  wrongDurationWords: string[];
  /** Which /v1 requests the request faults hit: all, only job submissions, or only status queries. */
  scope: 'all' | 'submit' | 'status';
  /** Every 429 (rate limit, running-jobs cap, injected) carries a Retry-After of at least this many seconds. */
  retryAfterMinSeconds: number;
}

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
  /** Result URLs stop working this long after the job finished; 0 = never. */
  urlTtlSeconds?: number;
  /** A job's status query answers 404 this long after the job finished (the gateway forgot it); 0 = never. */
  jobTtlSeconds?: number;
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
  | 'jobTtlSeconds'
  | 'idempotency'
>;

export const VIDEO_MODELS = ['modelfamily-1.0-r2v', 'modelfamily-1.1-r2v'];
export const CHAT_MODELS = ['modelfamily-chat-1.0'];
export const RESOLUTIONS = ['480P', '720P', '1080P'];

export interface ApiKeyRecord {
  id: string;
  key: string;
  description: string;
  enabled: boolean;
  /** Models this key may use; undefined = all. */
  models: string[] | undefined;
  createdAt: number;
  /** /v1 requests refused because this key was disabled or deleted. */
  refusedRequests?: number;
}

export interface Job {
  id: string;
  keyId: string;
  model: string;
  prompt: string;
  createdAt: number;
  startsAt: number;
  doneAt: number;
  outcome: { status: 'completed' } | { status: 'failed'; code: string; message: string };
  /** The Idempotency-Key the submit carried, whether honoured or not. */
  idempotencyKey?: string;
  /** sha256 of the submitted body: identical bodies that made several jobs were billed more than once. */
  bodyHash?: string;
  /** Status queries answered for this job (any status, including 404 once gone). */
  checks?: number;
  /** A response carrying the job's id reached the client intact. */
  idDelivered?: boolean;
  /** A `completed` answer with the URL reached the client intact. */
  resultDelivered?: boolean;
  /** This job answers every status query badly (job-faults.ts). */
  badAnswer?: BadJobAnswer;
  /** What the submit asked for (`parameters`), which the served video matches unless `videoFault` says. */
  resolution?: string;
  duration?: number;
  /** This job's video is not what was asked (video-faults.ts). */
  videoFault?: VideoFault;
}

/** mulberry32: small, fast, seedable; good enough for fault dice. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
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
  unknownStatus: 0,
  moderationWords: [],
  jobFailure: 0,
  jobNoUrl: 0,
  jobError5xx: 0,
  videoTruncated: 0,
  videoWrongResolution: 0,
  videoWrongDuration: 0,
  truncatedWords: [],
  wrongResolutionWords: [],
  wrongDurationWords: [],
  scope: 'all',
  retryAfterMinSeconds: 0,
};

const histogram = (counts: Iterable<number>): Record<string, number> => {
  const h: Record<string, number> = {};
  for (const n of counts) h[n] = (h[n] ?? 0) + 1;
  return h;
};

/** Drops undefined fields, so an absent setting keeps its current value. */
const defined = <T extends object>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

const bump = (map: Record<string, number>, key: string, by = 1) => {
  map[key] = (map[key] ?? 0) + by;
};

/** "path: message" of a zod error's first issue. */
export function formatIssue(error: z.ZodError): string {
  const first = error.issues[0];
  return `${first?.path.join('.') || 'body'}: ${first?.message ?? 'invalid'}`;
}

export type StateData = ReturnType<SimulatorState['persistable']>;

export class SimulatorState {
  readonly keys = new Map<string, ApiKeyRecord>();
  readonly jobs = new Map<string, Job>();
  /** Every key ever registered, by secret: a key removed from `keys` is "deleted", not "unknown". */
  private readonly everKeys = new Map<string, ApiKeyRecord>();
  private readonly byIdempotencyKey = new Map<string, string>();
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  readonly faults: FaultOptions;
  readonly options: RuntimeOptions;
  readonly random: () => number;
  readonly now: () => number;
  /** Epoch ms until which every /v1 request is held with 429; 0 = no hold. */
  holdUntil = 0;
  /** Hold windows [from, until], to count jobs that finished while clients were held. */
  private readonly holds: [number, number][] = [];
  private jobCounter = 0;
  readonly requestLog: { at: number; route: string; status: number; retryAfterMs?: number }[] = [];
  readonly stats = {
    requests: {} as Record<string, Record<string, number>>,
    jobsCreated: 0,
    /** Every 429 sent, whatever the reason (see `rateLimitedByReason`). */
    rateLimited: 0,
    rateLimitedByReason: {} as Record<string, number>,
    /** /v1 requests answered 429 because of a hold. */
    held: 0,
    idempotentReplays: 0,
    submitsWithoutIdempotencyKey: 0,
    faultsInjected: {} as Record<string, number>,
    /** After-processing faults on submits that created a job: billed, but the answer was lost (by fault kind). */
    ambiguousSubmits: {} as Record<string, number>,
    /** /v1 requests sent with a key that is not registered (never was) or with no key at all. */
    requestsWithUnknownKey: 0,
    requestsWithoutKey: 0,
    /** Status queries for a job past `jobTtlSeconds`, answered 404. */
    goneQueries: 0,
  };

  constructor(
    options: RuntimeOptions & {
      faults?: Partial<FaultOptions>;
      seed: number;
      now?: () => number;
      holdUntil?: number;
    },
  ) {
    const { faults, seed, now, holdUntil, ...runtime } = options;
    this.options = runtime;
    this.faults = structuredClone(DEFAULT_FAULTS);
    this.setFaults(faults ?? {});
    this.random = prng(seed);
    this.now = now ?? Date.now;
    if (holdUntil) this.setHold(holdUntil);
  }

  createKey(description = '', models?: string[], key?: string): ApiKeyRecord {
    const record: ApiKeyRecord = {
      id: `key_${randomBytes(6).toString('hex')}`,
      key: key ?? `sk-${randomBytes(24).toString('base64url')}`,
      description,
      enabled: true,
      models,
      createdAt: this.now(),
    };
    if (!record.key.startsWith('sk-')) throw new Error('API keys start with sk-');
    this.keys.set(record.id, record);
    this.everKeys.set(record.key, record);
    return record;
  }

  findKey(secret: string): ApiKeyRecord | undefined {
    for (const record of this.keys.values()) if (record.key === secret) return record;
    return undefined;
  }

  /** A key that was registered once and has since been deleted. */
  deletedKey(secret: string): ApiKeyRecord | undefined {
    const record = this.everKeys.get(secret);
    return record && this.keys.get(record.id) !== record ? record : undefined;
  }

  countRequest(route: string, status: number): void {
    const byStatus = (this.stats.requests[route] ??= {});
    byStatus[status] = (byStatus[status] ?? 0) + 1;
  }

  countRefused(record: ApiKeyRecord): void {
    record.refusedRequests = (record.refusedRequests ?? 0) + 1;
  }

  count429(reason: string): void {
    this.stats.rateLimited += 1;
    bump(this.stats.rateLimitedByReason, reason);
    if (reason === 'held') this.stats.held += 1;
  }

  countAmbiguousSubmit(fault: AfterProcessingFault): void {
    bump(this.stats.ambiguousSubmits, fault);
  }

  roll(fault: FaultKind): boolean {
    const p = this.faults[fault];
    const hit = p > 0 && this.random() < p;
    if (hit) bump(this.stats.faultsInjected, fault);
    return hit;
  }

  /** Changes fault settings at runtime; throws on unknown fields or out-of-range values. */
  setFaults(faults: Partial<FaultOptions>): FaultOptions {
    const parsed = faultsSchema.safeParse(faults);
    if (!parsed.success) throw new Error(`faults: ${formatIssue(parsed.error)}`);
    return Object.assign(this.faults, defined(parsed.data));
  }

  /** Changes limits and behaviour at runtime; throws on unknown fields or out-of-range values. */
  setOptions(options: Partial<RuntimeOptions>): RuntimeOptions {
    const parsed = runtimeOptionsSchema.safeParse(options);
    if (!parsed.success) throw new Error(`options: ${formatIssue(parsed.error)}`);
    return Object.assign(this.options, defined(parsed.data));
  }

  /** Sets (or with 0/undefined, releases) the hold; jobs keep progressing meanwhile. */
  setHold(until: number | Date | undefined): void {
    const at = until === undefined ? 0 : typeof until === 'number' ? until : until.getTime();
    const now = this.now();
    // A release or a new hold closes the current window at now.
    const open = this.holds.at(-1);
    if (open && open[1] > now) open[1] = now;
    this.holdUntil = at > now ? at : 0;
    if (this.holdUntil) this.holds.push([now, this.holdUntil]);
  }

  /** Ms left on the hold, or 0. */
  holdWait(): number {
    return Math.max(0, this.holdUntil - this.now());
  }

  /** Takes one token from the key's bucket; returns ms to wait when empty. */
  takeToken(keyId: string): number {
    const rate = this.options.rateLimit;
    if (rate <= 0) return 0;
    const burst = this.options.burst > 0 ? this.options.burst : Math.max(1, rate);
    const now = this.now();
    const bucket = this.buckets.get(keyId) ?? { tokens: burst, at: now };
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * rate);
    bucket.at = now;
    this.buckets.set(keyId, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - bucket.tokens) / rate) * 1000);
  }

  /** Ms until one of the key's unfinished jobs finishes, when the key is at its running-jobs cap; else 0. */
  runningCapWait(keyId: string): number {
    const cap = this.options.maxRunningJobs;
    if (cap <= 0) return 0;
    const now = this.now();
    const active = [...this.jobs.values()].filter((j) => j.keyId === keyId && j.doneAt > now);
    if (active.length < cap) return 0;
    return Math.min(...active.map((j) => j.doneAt)) - now;
  }

  /** Idempotency keys, like jobs, are scoped to the account (every key of this simulator), not to one API key. */
  idempotentJob(idempotencyKey: string | undefined): Job | undefined {
    if (!idempotencyKey || !this.options.idempotency) return undefined;
    const jobId = this.byIdempotencyKey.get(idempotencyKey);
    if (!jobId) return undefined;
    this.stats.idempotentReplays += 1;
    return this.jobs.get(jobId);
  }

  createJob(
    keyId: string,
    body: {
      model: string;
      input: { prompt: string };
      parameters?: { resolution?: string | undefined; duration?: number | undefined };
    },
    idempotencyKey?: string,
  ): Job {
    const now = this.now();
    const { jobSeconds, jobJitterSeconds } = this.options;
    const seconds = Math.max(0.05, jobSeconds + jobJitterSeconds * (2 * this.random() - 1));
    const prompt = body.input.prompt;
    const moderated = this.faults.moderationWords.find((w) => prompt.toLowerCase().includes(w.toLowerCase()));
    const job: Job = {
      id: `vid_${(++this.jobCounter).toString(36).padStart(6, '0')}${randomBytes(4).toString('hex')}`,
      keyId,
      model: body.model,
      prompt,
      createdAt: now,
      startsAt: now + Math.min(2000, seconds * 100),
      doneAt: now + seconds * 1000,
      outcome: moderated
        ? {
            status: 'failed',
            code: 'content_moderation',
            message: `The prompt was rejected by moderation (${moderated}).`,
          }
        : this.roll('jobFailure')
          ? {
              status: 'failed',
              code: 'generation_failed',
              message: 'The model failed to generate this video.',
            }
          : { status: 'completed' },
      ...(idempotencyKey ? { idempotencyKey } : {}),
      bodyHash: createHash('sha256').update(JSON.stringify(body)).digest('hex'),
      checks: 0,
      idDelivered: false,
      resultDelivered: false,
      ...rollBadAnswer((fault) => this.roll(fault)),
      ...(body.parameters?.resolution ? { resolution: body.parameters.resolution } : {}),
      ...(body.parameters?.duration !== undefined ? { duration: body.parameters.duration } : {}),
      ...(moderated ? {} : chooseVideoFault(prompt, this.faults, (fault) => this.roll(fault))),
    };
    this.jobs.set(job.id, job);
    this.stats.jobsCreated += 1;
    if (!idempotencyKey) this.stats.submitsWithoutIdempotencyKey += 1;
    if (idempotencyKey && this.options.idempotency) this.byIdempotencyKey.set(idempotencyKey, job.id);
    return job;
  }

  jobStatus(job: Job): string {
    const now = this.now();
    if (now < job.startsAt) return 'queued';
    if (now < job.doneAt) return 'running';
    return job.outcome.status;
  }

  /** The gateway forgot the job: `jobTtlSeconds` after it finished, its status query answers 404. */
  isGone(job: Job): boolean {
    const ttl = this.options.jobTtlSeconds;
    return ttl > 0 && this.now() > job.doneAt + ttl * 1000;
  }

  /** What a restarted simulator needs to keep answering for earlier jobs (and to keep counting them). */
  persistable() {
    return {
      keys: [...this.keys.values()],
      deletedKeys: [...this.everKeys.values()].filter((k) => this.keys.get(k.id) !== k),
      jobs: [...this.jobs.values()],
      idempotency: [...this.byIdempotencyKey.entries()],
      jobCounter: this.jobCounter,
    };
  }

  restore(data: Partial<StateData> & Pick<StateData, 'keys' | 'jobs' | 'jobCounter'>): void {
    for (const k of data.keys) {
      if (this.findKey(k.key)) continue;
      this.keys.set(k.id, k);
      this.everKeys.set(k.key, k);
    }
    for (const k of data.deletedKeys ?? []) if (!this.everKeys.has(k.key)) this.everKeys.set(k.key, k);
    for (const j of data.jobs) this.jobs.set(j.id, j);
    for (const [k, v] of data.idempotency ?? []) this.byIdempotencyKey.set(k, v);
    this.jobCounter = Math.max(this.jobCounter, data.jobCounter);
  }

  /**
   * Counters for tests. Job-derived figures cover every job this simulator knows, restored ones included;
   * request counters cover this process only.
   */
  snapshot() {
    const now = this.now();
    const perIdempotencyKey = new Map<string, number>();
    const perBody = new Map<string, number>();
    let jobsCompleted = 0;
    let jobsFailed = 0;
    let jobsFinishedWhileHeld = 0;
    let jobIdsNeverDelivered = 0;
    let completedJobsNeverDelivered = 0;
    let statusChecks = 0;
    const badAnswers: Record<string, string[]> = {};
    const videoFaults: Record<string, string[]> = {};
    const checks: number[] = [];
    for (const job of this.jobs.values()) {
      if (job.idempotencyKey)
        perIdempotencyKey.set(job.idempotencyKey, (perIdempotencyKey.get(job.idempotencyKey) ?? 0) + 1);
      if (job.bodyHash) perBody.set(job.bodyHash, (perBody.get(job.bodyHash) ?? 0) + 1);
      const finished = job.doneAt <= now;
      if (finished && job.outcome.status === 'completed') jobsCompleted += 1;
      if (finished && job.outcome.status === 'failed') jobsFailed += 1;
      if (finished && this.holds.some(([from, until]) => job.doneAt >= from && job.doneAt < until))
        jobsFinishedWhileHeld += 1;
      if (job.idDelivered === false) jobIdsNeverDelivered += 1;
      if (finished && job.outcome.status === 'completed' && job.resultDelivered === false)
        completedJobsNeverDelivered += 1;
      if (job.badAnswer) (badAnswers[job.badAnswer] ??= []).push(job.id);
      if (job.videoFault) (videoFaults[job.videoFault] ??= []).push(job.id);
      statusChecks += job.checks ?? 0;
      checks.push(job.checks ?? 0);
    }
    const billedMoreThanOnce = Object.fromEntries([...perIdempotencyKey].filter(([, n]) => n > 1));
    const everKeys = [...this.everKeys.values()];
    const refused = (deleted: boolean) =>
      Object.fromEntries(
        everKeys
          .filter((k) => (this.keys.get(k.id) !== k) === deleted && (k.refusedRequests ?? 0) > 0)
          .map((k) => [k.id, k.refusedRequests ?? 0]),
      );
    return {
      ...structuredClone(this.stats),
      ambiguousSubmitsTotal: Object.values(this.stats.ambiguousSubmits).reduce((a, b) => a + b, 0),
      /** Requests refused with 403 because the key was disabled, per key id. */
      requestsWithDisabledKey: refused(false),
      /** Requests refused with 401 because the key had been deleted, per key id. */
      requestsWithDeletedKey: refused(true),
      /** How many Idempotency-Keys produced 1, 2, ... jobs: any entry above "1" means a row paid twice. */
      jobsPerIdempotencyKey: histogram(perIdempotencyKey.values()),
      idempotencyKeysWithMultipleJobs: Object.keys(billedMoreThanOnce).length,
      /** The Idempotency-Keys that produced more than one job, with their job counts. */
      idempotencyKeysBilledMoreThanOnce: billedMoreThanOnce,
      /** How many distinct request bodies produced 1, 2, ... jobs: any key above "1" means a paid-twice body. */
      jobsPerIdenticalBody: histogram(perBody.values()),
      bodiesWithMultipleJobs: [...perBody.values()].filter((n) => n > 1).length,
      jobsCompleted,
      jobsFailed,
      jobsUnfinished: this.jobs.size - jobsCompleted - jobsFailed,
      /** Jobs that finished while a hold was refusing every request. */
      jobsFinishedWhileHeld,
      /** Jobs billed whose id no client ever received intact. */
      jobIdsNeverDelivered,
      /** Completed (paid) jobs whose URL no client ever received: videos lost, as far as the gateway sees. */
      completedJobsNeverDelivered,
      statusChecks,
      /** How many jobs got 0, 1, 2, ... status queries. */
      statusChecksPerJob: histogram(checks),
      /** Jobs that answer every status query badly, by kind (job-faults.ts). */
      jobsWithBadAnswers: badAnswers,
      /** Jobs whose video is not what was asked, by kind (video-faults.ts). */
      jobsWithVideoFaults: videoFaults,
      holdUntil: this.holdUntil ? new Date(this.holdUntil).toISOString() : null,
    };
  }
}

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
    unknownStatus: probability,
    jobFailure: probability,
    jobNoUrl: probability,
    jobError5xx: probability,
    videoTruncated: probability,
    videoWrongResolution: probability,
    videoWrongDuration: probability,
    slowMs: z.number().min(0),
    moderationWords: z.array(z.string()),
    truncatedWords: z.array(z.string()),
    wrongResolutionWords: z.array(z.string()),
    wrongDurationWords: z.array(z.string()),
    scope: z.enum(['all', 'submit', 'status']),
    retryAfterMinSeconds: z.number().min(0),
  })
  .partial();

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
    jobTtlSeconds: z.number().min(0),
    idempotency: z.boolean(),
  })
  .partial();
