// Video generation jobs: what one is, how it is made (latency, outcome, the faults decided once per job) and
// the state it is in at a given time. Jobs belong to the account, not to the key that submitted them.
import { createHash, randomBytes } from 'node:crypto';
import type { FaultKind, FaultOptions } from './fault-settings';
import { rollBadAnswer, type BadJobAnswer } from './job-faults';
import { chooseVideoFault, type VideoFault } from './video-faults';

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
  /** The token in the path of the job's current URL, once a fresh one was issued (result-files.ts). */
  urlToken?: string;
  /** When the current URL was issued; absent: when the job finished. */
  urlIssuedAt?: number;
}

/** The body of a submit, as the video route validated it. */
export interface GenerationBody {
  model: string;
  input: { prompt: string };
  parameters?: { resolution?: string | undefined; duration?: number | undefined };
}

/** What making a job needs from the simulator: time, dice and the fault settings. */
export interface JobMaker {
  now: number;
  /** A uniform number in [0, 1). */
  random: () => number;
  roll: (fault: FaultKind) => boolean;
  faults: FaultOptions;
  jobSeconds: number;
  jobJitterSeconds: number;
}

/** A new job numbered `counter`: it starts a little after `now` and ends after the job latency ± jitter. */
export function newJob(
  maker: JobMaker,
  counter: number,
  keyId: string,
  body: GenerationBody,
  idempotencyKey: string | undefined,
): Job {
  const { now, random, roll, faults, jobSeconds, jobJitterSeconds } = maker;
  const seconds = Math.max(0.05, jobSeconds + jobJitterSeconds * (2 * random() - 1));
  const prompt = body.input.prompt;
  const moderated = faults.moderationWords.find((w) => prompt.toLowerCase().includes(w.toLowerCase()));
  return {
    id: `vid_${counter.toString(36).padStart(6, '0')}${randomBytes(4).toString('hex')}`,
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
      : roll('jobFailure')
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
    ...rollBadAnswer(roll, prompt, faults),
    ...(body.parameters?.resolution ? { resolution: body.parameters.resolution } : {}),
    ...(body.parameters?.duration !== undefined ? { duration: body.parameters.duration } : {}),
    ...(moderated ? {} : chooseVideoFault(prompt, faults, roll)),
  };
}

/** queued, running, then the job's outcome (`completed` or `failed`). */
export function jobStatus(job: Job, now: number): string {
  if (now < job.startsAt) return 'queued';
  if (now < job.doneAt) return 'running';
  return job.outcome.status;
}

/** The gateway forgot the job: `ttlSeconds` (0: never) after it finished, its status query answers 404. */
export function isGone(job: Job, now: number, ttlSeconds: number): boolean {
  return ttlSeconds > 0 && now > job.doneAt + ttlSeconds * 1000;
}
