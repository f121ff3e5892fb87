// Claimed before paid: a request (its target and root, its request key) is claimed durably right before its
// POST, and at most one claim per request is live at any time, across batches, terminals and machines, by
// Temporal's workflow-id uniqueness (docs/spend-safety.md "Claimed before paid"). A claim is a workflow that never
// runs: started on a task queue no worker polls, with a start delay past its execution timeout, so it holds no
// task and needs no worker; its id says what is claimed, its memo who holds it, and its end what came of it:
// terminated with `job <id>` (paid: a batch that needs the request follows that job), terminated with `no job`
// (refused, not sent: the next claim may pay), or timed out (the holder died mid-POST or its outcome stayed
// unknown). Claims of one request are numbered (`/1`, `/2`, ...), each started at most once: the latest claim
// that ended with a job names the job the request is paid by, and only a row that knows that job failed, is
// gone or made no video (`replaces`) takes the next claim and pays again. A claim that timed out is still
// honoured while its holder's submit is pending (its retry may hold the job's id), so a slow retry never lets
// another row pay beside it.
import type { Client, WorkflowExecutionDescription } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import proto from '@temporalio/proto';
import { Context } from '@temporalio/activity';
import { SUBMIT_HEARTBEAT_TIMEOUT_MS } from '../contract/failures';
import { jobFollowedSignal } from '../contract/messages';
import { promptWorkflowId } from '../contract/prompt';
import type { SubmitResult } from '../contract/jobs';
import type { ReusedFrom } from '../contract/prompt';
import type { JournalEntry } from '../results/jobs-journal';
import type { PromptRow } from '../contract/rows';
import { scopeOfBatch } from '../contract/target';
import { NotSentError } from '../gateway/errors';

/** No worker polls it: a claim's workflow task is never scheduled anyway (its start delay outlasts it). */
export const CLAIM_TASK_QUEUE = 'vidbatch-request-claims';
/** The workflow type a claim is recorded as (there is no such workflow: it never runs). */
export const CLAIM_WORKFLOW_TYPE = 'requestClaim';
/** How often a submit looks again at a claim another row holds, and how long it waits before retrying later. */
const LOOK_EVERY_MS = 250;
const WAIT_IN_ATTEMPT_MS = 5_000;

/** Who claims: the row, and its Idempotency-Key (the same across the retries and resends of one submit). */
export interface ClaimHolder extends ReusedFrom {
  key: string;
}

/** The request of `batchId` (its scope: target and root) with `request` key, claim number `n`. */
export function claimId(batchId: string, request: string, n: number): string {
  return `claim/${scopeOfBatch(batchId) ?? batchId}/${request}/${n}`;
}

/** Another row's claim ended with a job: this row follows that job instead of paying for the request again. */
export class PaidElsewhere extends Error {
  override name = 'PaidElsewhere';
  constructor(
    readonly jobId: string,
    readonly holder: ReusedFrom,
  ) {
    super(`${holder.batchId} row ${holder.rowId} paid for the same request: job ${jobId}`);
  }
}

export interface Claim {
  id: string;
  /** Ends the claim with what came of the POST: a job id, or none (refused or not sent). */
  release(jobId: string | undefined, why?: string): Promise<void>;
}

const ENDED_WITH_JOB = /^job (\S+)$/;

/**
 * Claims the request for `holder`, or throws: PaidElsewhere when the latest claim that ended with a job is not
 * `replaces` (a job this row knows failed, so it pays for a new one); NotSentError (retried later by Temporal)
 * while another row's claim is live past a short wait (`waitMs`, at most 5 s). `holdMs` bounds the claim: it
 * times out on its own if its holder never releases it.
 */
export async function claimRequest(
  client: Client,
  o: {
    batchId: string;
    request: string;
    holder: ClaimHolder;
    holdMs: number;
    replaces?: string;
    /** How long this call may wait for another row's claim (the attempt's hold budget). */
    waitMs?: number;
    /** Called while waiting, so the attempt's heartbeat stays alive. */
    waiting?: () => void;
  },
): Promise<Claim> {
  const waitUntil = Date.now() + Math.min(o.waitMs ?? WAIT_IN_ATTEMPT_MS, WAIT_IN_ATTEMPT_MS);
  let paid: PaidElsewhere | undefined;
  for (let n = 1; ; n++) {
    const id = claimId(o.batchId, o.request, n);
    for (;;) {
      // Nothing paid so far: try to take this claim at once (one call on the common path, a request no one
      // claimed); else look at it first, since past a paid claim none may be started.
      if (!paid) {
        const runId = await start(client, id, o.holder, o.holdMs);
        if (runId) return handleOf(client, id, runId);
      }
      const claim = await describe(client, id);
      // The end of the chain: the latest job paid for the request is followed, never paid again.
      if (!claim) {
        if (paid) throw paid;
        // Gone between the start and the look (past its retention): take it now, within the same short wait.
        if (Date.now() >= waitUntil)
          throw new NotSentError(WAIT_IN_ATTEMPT_MS, 'not sent: the claim of the request is being replaced');
        continue;
      }
      const holder = claim.memo?.holder as ClaimHolder | undefined;
      const status = claim.status.name;
      const live =
        status === 'RUNNING' ||
        (status === 'TIMED_OUT' && holder?.key !== o.holder.key && (await submitPending(client, holder)));
      if (live) {
        if (holder?.key === o.holder.key) return handleOf(client, id, claim.runId);
        if (Date.now() >= waitUntil)
          throw new NotSentError(
            WAIT_IN_ATTEMPT_MS,
            `not sent: ${holder?.batchId ?? 'another batch'} row ${holder?.rowId ?? '?'} is paying for the same ` +
              'request; this row follows its job, or sends once that claim ends without one',
          );
        o.waiting?.();
        await new Promise((r) => setTimeout(r, LOOK_EVERY_MS));
        continue;
      }
      const jobId = status === 'TERMINATED' ? await endedWithJob(client, id, claim.runId) : undefined;
      // The latest job paid for the request is the one that counts: a replaced (dead) one frees the next claim.
      if (jobId && holder)
        paid =
          jobId === o.replaces
            ? undefined
            : new PaidElsewhere(jobId, { batchId: holder.batchId, rowId: holder.rowId });
      break; // the next claim: a later one may have paid again, or this row may claim it
    }
  }
}

/**
 * Whether the holder of a claim that timed out still has its submit pending (a retry waiting for its turn may
 * find the job's id in its heartbeat or journal): its claim is honoured until that submit ends.
 */
async function submitPending(client: Client, holder: ClaimHolder | undefined): Promise<boolean> {
  if (!holder) return false;
  const prompt = await describe(client, promptWorkflowId(holder.batchId, holder.rowId));
  if (prompt?.status.name !== 'RUNNING') return false;
  return (prompt.raw.pendingActivities ?? []).some((a) => a.activityType?.name === 'submitJob');
}

async function describe(client: Client, id: string): Promise<WorkflowExecutionDescription | undefined> {
  try {
    return await client.workflow.getHandle(id).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}

/** Starts claim `id` for `holder`: its run id, or undefined when it exists already (held or ended). */
async function start(
  client: Client,
  id: string,
  holder: ClaimHolder,
  holdMs: number,
): Promise<string | undefined> {
  try {
    const handle = await client.workflow.start(CLAIM_WORKFLOW_TYPE, {
      workflowId: id,
      taskQueue: CLAIM_TASK_QUEUE,
      args: [],
      workflowExecutionTimeout: holdMs,
      // Never dispatched: the claim ends (released or timed out) before its first workflow task is due.
      startDelay: holdMs + 60_000,
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      memo: { holder },
      staticSummary: `claim of request ${id.split('/').slice(2, -1).join('/')} by ${holder.batchId} row ${holder.rowId}`,
    });
    return handle.firstExecutionRunId;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return undefined;
    throw err;
  }
}

/** The job a terminated claim ended with (its termination reason), if any. */
async function endedWithJob(client: Client, id: string, runId: string): Promise<string | undefined> {
  const { history } = await client.workflowService.getWorkflowExecutionHistory({
    namespace: client.options.namespace,
    execution: { workflowId: id, runId },
    historyEventFilterType:
      proto.temporal.api.enums.v1.HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT,
  });
  const reason = history?.events?.at(-1)?.workflowExecutionTerminatedEventAttributes?.reason ?? '';
  return ENDED_WITH_JOB.exec(reason)?.[1];
}

function handleOf(client: Client, id: string, runId: string): Claim {
  return {
    id,
    async release(jobId, why) {
      await client.workflow
        .getHandle(id, runId)
        .terminate(jobId ? `job ${jobId}` : `no job: ${why ?? 'not sent'}`.slice(0, 500));
    },
  };
}

/**
 * Tells the row that paid for a job (its prompt) that `follower` follows it, so it never stops that job at the
 * provider under the follower. A prompt that has closed cannot stop it any more: nothing to tell.
 */
export async function tellPayer(
  client: Client,
  payer: ReusedFrom,
  followed: { jobId: string; batchId: string; rowId: string },
): Promise<void> {
  await client.workflow
    .getHandle(promptWorkflowId(payer.batchId, payer.rowId))
    .signal(jobFollowedSignal, followed)
    .catch((err: unknown) => {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    });
}

/** How long a claim outlives its attempt's heartbeat timeout: a retry's time to find the job and end it. */
const CLAIM_MARGIN_MS = 60_000;

/** What of a submit's input (activities/jobs.ts SubmitInput) its claim needs. */
interface ClaimedSubmit {
  batchId: string;
  row: PromptRow;
  claimRequest?: boolean;
  replaces?: string;
}

/** What the submit activity does with claims, around its POST. `journal` writes a journal line (jobs.ts). */
export function claimSteps<SubmitInput extends ClaimedSubmit>(
  journal: (
    input: SubmitInput,
    entry: Omit<JournalEntry, 'at' | 'generation'>,
  ) => Promise<string | undefined>,
) {
  /** The claim of the row's request (request-claims.ts), for a batch that shares its root's requests. */
  const claimFor = async (input: SubmitInput, key: string, waitMs?: number): Promise<Claim | undefined> => {
    const { row } = input;
    if (!input.claimRequest || !row.request) return undefined;
    const ctx = Context.current();
    return claimRequest(ctx.client, {
      batchId: input.batchId,
      request: row.request,
      holder: { batchId: input.batchId, rowId: row.id, key },
      // Past this attempt and a retry's look at its heartbeat: a holder that died mid-POST still settles it.
      holdMs: ctx.info.startToCloseTimeoutMs + SUBMIT_HEARTBEAT_TIMEOUT_MS + CLAIM_MARGIN_MS,
      ...(input.replaces ? { replaces: input.replaces } : {}),
      ...(waitMs !== undefined ? { waitMs } : {}),
      // The submit heartbeat: not sending (see SubmitHeartbeat in jobs.ts).
      waiting: () => ctx.heartbeat({ sending: false }),
    });
  };

  /** Ends a claim with what came of the POST. A claim not released times out: logged, never thrown. */
  const release = async (claim: Claim | undefined, jobId: string | undefined, why?: string) => {
    await claim?.release(jobId, why).catch((err: unknown) => {
      Context.current().log.warn('could not release the claim of the request; it times out on its own', {
        claim: claim.id,
        error: String(err),
      });
    });
  };

  /** A retry that took its job from the heartbeat or the journal ends the claim the attempt that paid held. */
  const settleClaim = async (input: SubmitInput, key: string, jobId: string) => {
    try {
      await release(await claimFor(input, key), jobId);
    } catch (err) {
      // Released already (PaidElsewhere names this row's own job), or held by another row: nothing to end. Any
      // other error (the server unreachable) fails the attempt: its retry finds the job again and settles.
      if (!(err instanceof PaidElsewhere || err instanceof NotSentError)) throw err;
    }
  };

  /**
   * Another row claimed the request and paid for `paid.jobId`: this row follows that job, paying nothing. Its
   * journal line names whose payment it is, so the ledger counts the job once, where it was paid; a re-run of
   * this row checks it like any job it knows.
   */
  const followClaimed = async (input: SubmitInput, paid: PaidElsewhere): Promise<SubmitResult> => {
    const { row } = input;
    const own = paid.holder.batchId === input.batchId && paid.holder.rowId === row.id;
    const ctx = Context.current();
    ctx.log.info(
      own ? 'job found in its claim; not sending again' : 'request paid by another row; following its job',
      {
        rowId: row.id,
        jobId: paid.jobId,
        ...(own ? {} : { paidBy: `${paid.holder.batchId}/${paid.holder.rowId}` }),
      },
    );
    const journalError = await journal(input, {
      rowId: row.id,
      jobId: paid.jobId,
      ...(own ? {} : { followedFrom: paid.holder }),
    });
    if (!own)
      await tellPayer(ctx.client, paid.holder, { jobId: paid.jobId, batchId: input.batchId, rowId: row.id });
    return {
      jobId: paid.jobId,
      submittedAt: Date.now(),
      attempts: 0,
      ...(own ? {} : { followedFrom: paid.holder }),
      ...(journalError ? { journalError } : {}),
    };
  };

  return { claimFor, release, settleClaim, followClaimed };
}
