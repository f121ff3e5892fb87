// The simulator's counters, which tests and benchmarks read (`stats()`, GET /admin/stats): what the gateway
// saw and billed, so a test can prove from the gateway's side that no row was paid twice, no answer lost
// unnoticed, no refused key kept hammering.
import type { Job } from './jobs';

/** Counters kept per request as it is answered. */
export function newCounters() {
  return {
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
    /** Result videos served whole (200), after any redirects. */
    videosServed: 0,
    /** `302 Found` answers of result URLs (`redirectResults`), every hop counted. */
    redirectsServed: 0,
    /** Requests for a result URL past its expiry, answered 403. */
    expiredUrlRequests: 0,
    /** New result URLs given to status checks after the old one expired (`freshUrlOnCheck`). */
    freshUrlsIssued: 0,
    /** 500 pages that printed the request's headers, Authorization included (`echoHeaders500`). */
    headerEchoPages: 0,
    /** Chat completions answered 200, by model (the billed ones; a 429 or 500 is not among them). */
    chatCalls: {} as Record<string, number>,
    /** Chat completions answered 200 without a usable `content` (`chatEmpty`, `chatMissing`), by kind. */
    chatBadAnswers: {} as Record<string, number>,
  };
}

export type Counters = ReturnType<typeof newCounters>;

/** The failure codes of jobs a dialect's cancel ended (dialect-common.ts endJob): fal's and OpenAI's, Replicate's. */
const STOPPED_CODES: ReadonlySet<string> = new Set(['cancelled', 'canceled']);

/** Whether a cancel ended the job (whether or not its end has come yet, by the simulator's clock). */
export const isStoppedJob = (job: Job): boolean =>
  job.outcome.status === 'failed' && STOPPED_CODES.has(job.outcome.code);

export const bump = (map: Record<string, number>, key: string, by = 1) => {
  map[key] = (map[key] ?? 0) + by;
};

const histogram = (counts: Iterable<number>): Record<string, number> => {
  const h: Record<string, number> = {};
  for (const n of counts) h[n] = (h[n] ?? 0) + 1;
  return h;
};

/** What the snapshot needs beyond the counters. */
export interface SnapshotInput {
  counters: Counters;
  jobs: Iterable<Job>;
  jobCount: number;
  now: number;
  /** Whether a job that finished at this time finished during a hold. */
  wasHeld: (at: number) => boolean;
  refusedPerKey: (deleted: boolean) => Record<string, number>;
  holdUntil: number;
}

/**
 * Counters for tests. Job-derived figures cover every job this simulator knows, restored ones included;
 * request counters cover this process only.
 */
export function snapshotOf({
  counters,
  jobs,
  jobCount,
  now,
  wasHeld,
  refusedPerKey,
  holdUntil,
}: SnapshotInput) {
  const perIdempotencyKey = new Map<string, number>();
  const perBody = new Map<string, number>();
  let jobsCompleted = 0;
  let jobsFailed = 0;
  let jobsStopped = 0;
  let jobsFinishedWhileHeld = 0;
  let jobIdsNeverDelivered = 0;
  let completedJobsNeverDelivered = 0;
  let statusChecks = 0;
  const badAnswers: Record<string, string[]> = {};
  const videoFaults: Record<string, string[]> = {};
  const checks: number[] = [];
  for (const job of jobs) {
    if (job.idempotencyKey)
      perIdempotencyKey.set(job.idempotencyKey, (perIdempotencyKey.get(job.idempotencyKey) ?? 0) + 1);
    if (job.bodyHash) perBody.set(job.bodyHash, (perBody.get(job.bodyHash) ?? 0) + 1);
    const finished = job.doneAt <= now;
    if (finished && job.outcome.status === 'completed') jobsCompleted += 1;
    if (finished && job.outcome.status === 'failed') jobsFailed += 1;
    if (finished && isStoppedJob(job)) jobsStopped += 1;
    if (finished && wasHeld(job.doneAt)) jobsFinishedWhileHeld += 1;
    if (job.idDelivered === false) jobIdsNeverDelivered += 1;
    if (finished && job.outcome.status === 'completed' && job.resultDelivered === false)
      completedJobsNeverDelivered += 1;
    if (job.badAnswer) (badAnswers[job.badAnswer] ??= []).push(job.id);
    if (job.videoFault) (videoFaults[job.videoFault] ??= []).push(job.id);
    statusChecks += job.checks ?? 0;
    checks.push(job.checks ?? 0);
  }
  const billedMoreThanOnce = Object.fromEntries([...perIdempotencyKey].filter(([, n]) => n > 1));
  return {
    ...structuredClone(counters),
    chatCallsTotal: Object.values(counters.chatCalls).reduce((a, b) => a + b, 0),
    ambiguousSubmitsTotal: Object.values(counters.ambiguousSubmits).reduce((a, b) => a + b, 0),
    /** Requests refused with 403 because the key was disabled, per key id. */
    requestsWithDisabledKey: refusedPerKey(false),
    /** Requests refused with 401 because the key had been deleted, per key id. */
    requestsWithDeletedKey: refusedPerKey(true),
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
    /** Of the failed jobs, those a cancel (or a deadline the client set) stopped before they finished. */
    jobsStopped,
    jobsUnfinished: jobCount - jobsCompleted - jobsFailed,
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
    holdUntil: holdUntil ? new Date(holdUntil).toISOString() : null,
  };
}
