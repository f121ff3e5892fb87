// The simulated gateway's model: API keys, jobs, per-key limits, fault dice and counters. No HTTP here.
import { createHash, randomBytes } from 'node:crypto';

export interface FaultOptions {
  /** Probability that a /v1 request gets a 5xx without being processed. */
  error5xx: number;
  /** Probability that a /v1 response is delayed by `slowMs` (after the request was processed). */
  slow: number;
  slowMs: number;
  /** Probability that the connection is dropped after the request was processed. */
  drop: number;
  /** Probability that a /v1 response body is malformed JSON (after the request was processed). */
  malformed: number;
  /** Probability that a status query of an unfinished job reports a status outside the documented set. */
  unknownStatus: number;
  /** Prompts containing any of these words (case-insensitive) end as failed with `content_moderation`. */
  moderationWords: string[];
  /** Probability that a job ends as failed with `generation_failed`. */
  jobFailure: number;
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
  /** Honour Idempotency-Key (default true). Off, a repeated key creates a new job (to test clients without it). */
  idempotency?: boolean;
  faults?: Partial<FaultOptions>;
  seed?: number;
  now?: () => number;
  /** Keep a log of every /v1 request (time, route, status, Retry-After) for tests that check timing. */
  recordRequests?: boolean;
  /** Keep keys and jobs in this JSON file, so a restarted simulator still knows earlier jobs. */
  stateFile?: string;
}

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

export type StateData = ReturnType<SimulatorState['persistable']>;

export class SimulatorState {
  readonly keys = new Map<string, ApiKeyRecord>();
  readonly jobs = new Map<string, Job>();
  private readonly byIdempotencyKey = new Map<string, string>();
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly jobsPerBody = new Map<string, number>();
  readonly faults: FaultOptions;
  readonly random: () => number;
  readonly now: () => number;
  private jobCounter = 0;
  readonly requestLog: { at: number; route: string; status: number; retryAfterMs?: number }[] = [];
  readonly stats = {
    requests: {} as Record<string, Record<string, number>>,
    jobsCreated: 0,
    rateLimited: 0,
    idempotentReplays: 0,
    faultsInjected: {} as Record<string, number>,
  };

  constructor(
    readonly options: Required<
      Omit<
        SimulatorOptions,
        'faults' | 'seed' | 'now' | 'host' | 'port' | 'apiKeys' | 'stateFile' | 'recordRequests'
      >
    > & {
      faults?: Partial<FaultOptions>;
      seed: number;
      now?: () => number;
    },
  ) {
    this.faults = {
      error5xx: 0,
      slow: 0,
      slowMs: 30_000,
      drop: 0,
      malformed: 0,
      unknownStatus: 0,
      moderationWords: [],
      jobFailure: 0,
      ...options.faults,
    };
    this.random = prng(options.seed);
    this.now = options.now ?? Date.now;
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
    return record;
  }

  findKey(secret: string): ApiKeyRecord | undefined {
    for (const record of this.keys.values()) if (record.key === secret) return record;
    return undefined;
  }

  countRequest(route: string, status: number): void {
    const byStatus = (this.stats.requests[route] ??= {});
    byStatus[status] = (byStatus[status] ?? 0) + 1;
  }

  roll(fault: keyof Omit<FaultOptions, 'slowMs' | 'moderationWords'>): boolean {
    const hit = this.faults[fault] > 0 && this.random() < this.faults[fault];
    if (hit) this.stats.faultsInjected[fault] = (this.stats.faultsInjected[fault] ?? 0) + 1;
    return hit;
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

  createJob(keyId: string, body: { model: string; input: { prompt: string } }, idempotencyKey?: string): Job {
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
    };
    this.jobs.set(job.id, job);
    this.stats.jobsCreated += 1;
    if (idempotencyKey && this.options.idempotency) this.byIdempotencyKey.set(idempotencyKey, job.id);
    const bodyHash = createHash('sha256').update(JSON.stringify(body)).digest('hex');
    this.jobsPerBody.set(bodyHash, (this.jobsPerBody.get(bodyHash) ?? 0) + 1);
    return job;
  }

  jobStatus(job: Job): string {
    const now = this.now();
    if (now < job.startsAt) return 'queued';
    if (now < job.doneAt) return 'running';
    return job.outcome.status;
  }

  /** What a restarted simulator needs to keep answering for earlier jobs. */
  persistable() {
    return {
      keys: [...this.keys.values()],
      jobs: [...this.jobs.values()],
      idempotency: [...this.byIdempotencyKey.entries()],
      jobCounter: this.jobCounter,
    };
  }

  restore(data: ReturnType<SimulatorState['persistable']>): void {
    for (const k of data.keys) if (!this.findKey(k.key)) this.keys.set(k.id, k);
    for (const j of data.jobs) this.jobs.set(j.id, j);
    for (const [k, v] of data.idempotency) this.byIdempotencyKey.set(k, v);
    this.jobCounter = Math.max(this.jobCounter, data.jobCounter);
  }

  snapshot() {
    const histogram: Record<string, number> = {};
    for (const count of this.jobsPerBody.values()) histogram[count] = (histogram[count] ?? 0) + 1;
    return {
      ...structuredClone(this.stats),
      /** How many distinct request bodies produced 1, 2, ... jobs: any key above "1" means a paid-twice body. */
      jobsPerIdenticalBody: histogram,
      bodiesWithMultipleJobs: [...this.jobsPerBody.values()].filter((n) => n > 1).length,
    };
  }
}
