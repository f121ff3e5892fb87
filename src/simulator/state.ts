// The simulated gateway's model, no HTTP here: it holds the keys (api-keys.ts), the jobs (jobs.ts), the
// limits and hold (rate-limits.ts), the fault settings and dice (fault-settings.ts) and the counters
// (counters.ts), and persists what a restarted simulator needs.
import { KeyRing, type ApiKeyRecord } from './api-keys';
import { bump, newCounters, snapshotOf } from './counters';
import {
  DEFAULT_FAULTS,
  faultsSchema,
  type AfterProcessingFault,
  type FaultKind,
  type FaultOptions,
} from './fault-settings';
import { isGone, jobStatus, newJob, type GenerationBody, type Job } from './jobs';
import { RateLimits, runningCapWait } from './rate-limits';
import {
  defined,
  formatIssue,
  runtimeOptionsSchema,
  type RuntimeOptions,
  type RuntimeOptionsInput,
} from './settings';

export type { ApiKeyRecord } from './api-keys';
export type { Job } from './jobs';

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
  private readonly ring = new KeyRing();
  /** The keys that exist now, by id (the console's list). */
  readonly keys = this.ring.keys;
  readonly jobs = new Map<string, Job>();
  private readonly byIdempotencyKey = new Map<string, string>();
  private readonly limits = new RateLimits();
  readonly faults: FaultOptions;
  readonly options: RuntimeOptions;
  readonly random: () => number;
  readonly now: () => number;
  private jobCounter = 0;
  readonly requestLog: { at: number; route: string; status: number; retryAfterMs?: number }[] = [];
  readonly stats = newCounters();
  /** Chat texts already refused by a `chat429Words` fault: the next call for them goes through. */
  readonly chatRefusedOnce = new Set<string>();

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

  /** Epoch ms until which every /v1 request is held with 429; 0 = no hold. */
  get holdUntil(): number {
    return this.limits.holdUntil;
  }

  createKey(description = '', models?: string[], key?: string): ApiKeyRecord {
    return this.ring.create(this.now(), description, models, key);
  }

  findKey(secret: string): ApiKeyRecord | undefined {
    return this.ring.find(secret);
  }

  /** A key that was registered once and has since been deleted. */
  deletedKey(secret: string): ApiKeyRecord | undefined {
    return this.ring.deleted(secret);
  }

  /** The key ring itself, for authenticating requests. */
  get keyRing(): KeyRing {
    return this.ring;
  }

  countRequest(route: string, status: number): void {
    const byStatus = (this.stats.requests[route] ??= {});
    byStatus[status] = (byStatus[status] ?? 0) + 1;
  }

  countRefused(record: ApiKeyRecord): void {
    this.ring.countRefused(record);
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
  setOptions(options: RuntimeOptionsInput): RuntimeOptions {
    const parsed = runtimeOptionsSchema.safeParse(options);
    if (!parsed.success) throw new Error(`options: ${formatIssue(parsed.error)}`);
    return Object.assign(this.options, defined(parsed.data));
  }

  /** Sets (or with 0/undefined, releases) the hold; jobs keep progressing meanwhile. */
  setHold(until: number | Date | undefined): void {
    this.limits.setHold(until, this.now());
  }

  /** Ms left on the hold, or 0. */
  holdWait(): number {
    return this.limits.holdWait(this.now());
  }

  /** Takes one token from the key's bucket; returns ms to wait when empty. */
  takeToken(keyId: string): number {
    return this.limits.takeToken(keyId, this.options.rateLimit, this.options.burst, this.now());
  }

  /** Ms until one of the key's unfinished jobs finishes, when the key is at its running-jobs cap; else 0. */
  runningCapWait(keyId: string): number {
    if (this.options.maxRunningJobs <= 0) return 0;
    const doneAts = [...this.jobs.values()].filter((j) => j.keyId === keyId).map((j) => j.doneAt);
    return runningCapWait(doneAts, this.options.maxRunningJobs, this.now());
  }

  /** Idempotency keys, like jobs, are scoped to the account (every key of this simulator), not to one API key. */
  idempotentJob(idempotencyKey: string | undefined): Job | undefined {
    if (!idempotencyKey || !this.options.idempotency) return undefined;
    const jobId = this.byIdempotencyKey.get(idempotencyKey);
    if (!jobId) return undefined;
    this.stats.idempotentReplays += 1;
    return this.jobs.get(jobId);
  }

  createJob(keyId: string, body: GenerationBody, idempotencyKey?: string): Job {
    const maker = {
      now: this.now(),
      random: this.random,
      roll: (fault: FaultKind) => this.roll(fault),
      faults: this.faults,
      jobSeconds: this.options.jobSeconds,
      jobJitterSeconds: this.options.jobJitterSeconds,
    };
    const job = newJob(maker, ++this.jobCounter, keyId, body, idempotencyKey);
    this.jobs.set(job.id, job);
    this.stats.jobsCreated += 1;
    if (!idempotencyKey) this.stats.submitsWithoutIdempotencyKey += 1;
    if (idempotencyKey && this.options.idempotency) this.byIdempotencyKey.set(idempotencyKey, job.id);
    return job;
  }

  jobStatus(job: Job): string {
    return jobStatus(job, this.now());
  }

  /** The gateway forgot the job: `jobTtlSeconds` after it finished, its status query answers 404. */
  isGone(job: Job): boolean {
    return isGone(job, this.now(), this.options.jobTtlSeconds);
  }

  /** What a restarted simulator needs to keep answering for earlier jobs (and to keep counting them). */
  persistable() {
    return {
      ...this.ring.persistable(),
      jobs: [...this.jobs.values()],
      idempotency: [...this.byIdempotencyKey.entries()],
      jobCounter: this.jobCounter,
    };
  }

  restore(data: Partial<StateData> & Pick<StateData, 'keys' | 'jobs' | 'jobCounter'>): void {
    this.ring.restore(data.keys, data.deletedKeys);
    for (const j of data.jobs) this.jobs.set(j.id, j);
    for (const [k, v] of data.idempotency ?? []) this.byIdempotencyKey.set(k, v);
    this.jobCounter = Math.max(this.jobCounter, data.jobCounter);
  }

  /** Counters for tests (counters.ts). */
  snapshot() {
    return snapshotOf({
      counters: this.stats,
      jobs: this.jobs.values(),
      jobCount: this.jobs.size,
      now: this.now(),
      wasHeld: (at) => this.limits.wasHeld(at),
      refusedPerKey: (deleted) => this.ring.refusedPerKey(deleted),
      holdUntil: this.limits.holdUntil,
    });
  }
}
