// Starting a batch from the command line and following it on the terminal: what `run` and `retry-failed`
// share (the session they need, --detach rules, progress, Ctrl-C, the summary and the exit code).
import { dirname } from 'node:path';
import type { PathRoots } from '../activities/paths';
import { CancelledFailure, isGrpcServiceError, WorkflowFailedError } from '@temporalio/client';
import { pollsHeldUntil } from '../client/batch-status';
import { previousInput } from '../client/rerun';
import type { StartedBatch } from '../client/batches';
import type { BatchProgress } from '../contract/progress';
import { openSession, type Session } from '../client/session';
import type { SimulatorOptions } from '../simulator/server';
import { ConfigError } from '../errors';
import { computeLedger, formatLedger } from '../results/ledger';
import { summarizeManifest } from '../results/manifest';
import type { Prices } from '../results/prices';
import { verificationLines } from '../results/verification-summary';
import { startAndFollow } from '../starter';
import { createProgressView } from './progress-view';
import { EXIT, fail, lateVideoLines, spendSafetyLines, summaryLine } from './support';

/**
 * The session of a command that starts a batch. Following: a worker runs here unless TEMPORAL_ADDRESS points
 * at a server with its own workers. Detached: only a server that outlives this command will do (TEMPORAL_ADDRESS
 * or a running `vidbatch server`), and no worker starts here; otherwise a ConfigError says what to start.
 */
export async function openBatchSession(o: {
  simulate: SimulatorOptions | false;
  detach: boolean;
  /** Folders the in-process worker may use besides its roots (see SessionOptions.allow). */
  allow?: Partial<PathRoots>;
}): Promise<Session> {
  if (o.detach && o.simulate)
    fail(
      new ConfigError(
        '--detach cannot be used with --simulate: the simulator runs inside this command and would stop with it. Run without --detach, or run `vidbatch simulator` and point GATEWAY_BASE_URL at it',
      ),
    );
  if (o.detach) {
    return openSession({ worker: false, localServer: 'lasting' }).catch((err: unknown) =>
      fail(
        err instanceof ConfigError
          ? new ConfigError(
              `--detach needs a server that keeps running after this command: ${err.message}, and run \`vidbatch worker\` (or run without --detach to follow the batch here)`,
            )
          : err,
      ),
    );
  }
  return openSession({
    simulate: o.simulate,
    ...(o.simulate ? { worker: true } : {}),
    ...(o.allow ? { allow: o.allow } : {}),
  }).catch(fail);
}

export interface FollowInTerminal {
  /** Starts the batch or attaches to it (`run`: startBatch; `retry-failed`: retryFailed); undefined: nothing to start. */
  start(): Promise<StartedBatch | undefined>;
  /** Printed when `start` found nothing to start. */
  nothingToDo?: string;
  detach: boolean;
  json?: boolean;
  /** The first line: "Started batch ..." / "Attached to batch ...". */
  startedLine(started: StartedBatch): string;
  /** The user's prices, for the ledger's estimated cost in the summary. */
  prices?: Prices;
}

/** gRPC's UNAVAILABLE: the server cannot be reached at all (as opposed to an answer that refuses). */
const UNAVAILABLE = 14;

/** Whether `err`, or what caused it, is the server being unreachable. */
function serverGone(err: unknown): boolean {
  for (let e = err; e; e = (e as { cause?: unknown }).cause)
    if (isGrpcServiceError(e) && Number(e.code) === UNAVAILABLE) return true;
  return false;
}

/** The innermost message of an error chain, first line only. */
function rootMessage(err: unknown): string {
  let e = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return (e instanceof Error ? e.message : String(e)).split('\n')[0]!;
}

/** Starts or attaches, then follows with a progress view; prints the summary and sets the exit code. */
export async function followInTerminal(session: Session, f: FollowInTerminal): Promise<void> {
  const abort = new AbortController();
  const onSigint = () => abort.abort();
  process.once('SIGINT', onSigint);
  const view = createProgressView();
  try {
    // Holds the batch is not told of (status checks held by a Retry-After): looked up every 10 s at most.
    let pollHold: { checkedAt: number; until?: number } = { checkedAt: 0 };
    const withPollHold = (batchId: string, p: BatchProgress): BatchProgress => {
      if (p.holdUntil || p.inFlight === 0) return p;
      if (Date.now() - pollHold.checkedAt > 10_000) {
        pollHold = { ...pollHold, checkedAt: Date.now() };
        void pollsHeldUntil(session.client, batchId)
          .then((until) => (pollHold = { ...pollHold, until }))
          .catch(() => undefined);
      }
      return pollHold.until && pollHold.until > Date.now() ? { ...p, holdUntil: pollHold.until } : p;
    };
    let batchId = 'The batch';
    const followed = await startAndFollow(() => f.start(), {
      detach: f.detach,
      signal: abort.signal,
      onStarted: (started) => {
        batchId = started.batchId;
        console.error(f.startedLine(started));
        if (session.uiUrl)
          console.error(
            `Temporal Web UI: ${session.uiUrl}/namespaces/${session.namespace}/workflows/${started.batchId}`,
          );
      },
      onProgress: (p) => view.update(withPollHold(p.batchId, p)),
    }).catch((err: unknown) => {
      // The server went away (its process ended, the machine lost it): one line, and what to do.
      if (serverGone(err)) {
        view.stop();
        console.error(
          `\nThe Temporal server this command used stopped answering (${rootMessage(err)}). ${batchId} is durable: ` +
            'once a server is up again (`vidbatch server` here, or the same TEMPORAL_ADDRESS), run the same command to follow it.',
        );
        process.exitCode = EXIT.error;
        return undefined;
      }
      // Cancelled from another shell (`vidbatch cancel`): told plainly, not as a stack of Temporal errors.
      if (!(err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure)) throw err;
      console.error(
        `\n${batchId} was cancelled. Finished rows are in its manifest; rows in flight are recorded as failed with code \`cancelled\` and their job id, the job stopped where the provider can cancel one. Running the same CSV again continues it: finished rows are skipped and known jobs are checked, not paid again; a row whose job was stopped gets a new one.`,
      );
      process.exitCode = EXIT.rowsFailed;
      return undefined;
    });
    if (!followed) return; // cancelled from another shell: said above
    if (!followed.started) {
      console.log(f.nothingToDo ?? 'Nothing to start.');
      return;
    }
    const { result } = followed;
    if (f.detach) {
      console.error(
        `Detached. ${batchId} makes progress only while workers run on task queue "${session.taskQueue}": run \`vidbatch worker\`${session.server === 'address' ? ' (same TEMPORAL_* settings)' : ' in this folder'} with GATEWAY_BASE_URL and GATEWAY_API_KEY. Follow it with \`vidbatch watch ${batchId}\`.`,
      );
      return;
    }
    view.stop();
    if (!result) {
      console.error(
        `\nStopped following ${batchId}. The batch is durable: run the same command again to continue.`,
      );
      process.exitCode = EXIT.interrupted;
      return;
    }
    if (f.json) console.log(JSON.stringify(result, null, 2));
    else {
      console.log(`${batchId}: ${summaryLine(result, true)}`);
      for (const line of spendSafetyLines(result)) console.log(line);
      // The ledger, when this process can read the batch's folder (a remote worker's may be elsewhere).
      const ledger =
        result.manifestPath &&
        (await computeLedger(dirname(result.manifestPath), { rows: result.total, prices: f.prices }).catch(
          () => undefined,
        ));
      if (ledger && (ledger.jobsMade || ledger.unknown)) console.log(formatLedger(ledger));
      // Which videos are on disk (and that provider URLs expire for those that are not).
      const final =
        result.manifestPath && (await summarizeManifest(result.manifestPath).catch(() => undefined));
      for (const line of verificationLines(final ? final.verification : undefined)) console.log(line);
      // Jobs of rows that ended on their deadline or with the cancel may still bring their videos: who checks.
      if (final && (final.lateJobs || final.arrivedLate)) {
        const lateForMs = (await previousInput(session.client, batchId))?.options.lateForMs ?? 0;
        const checkedBy = lateForMs <= 0 ? 'none' : session.worker ? 'here' : 'workers';
        for (const line of lateVideoLines(final, { batchId, lateForMs, checkedBy })) console.log(line);
      }
      if (result.stoppedReason)
        console.log(`Stopped early: ${result.stoppedReason}; ${result.notStarted} rows not submitted.`);
    }
    // The morning after: the gallery of what was made (README, "Reviewing a batch").
    console.error(`Review it: npx vidbatch review ${batchId}`);
    if (session.simulator) {
      const stats = session.simulator.stats();
      console.error(
        `Simulator: ${stats.jobsCreated} jobs created, ${stats.rateLimited} 429s sent, ${stats.idempotentReplays} idempotent replays`,
      );
    }
    process.exitCode = result.failed > 0 || result.notStarted > 0 ? EXIT.rowsFailed : EXIT.ok;
    if (result.notices?.length) await settleNotices(session, result.notices, abort.signal);
  } finally {
    view.stop();
    process.removeListener('SIGINT', onSigint);
  }
}

/**
 * The batch's notices once it ended. This process's worker is the one that delivers them (an embedded or local
 * server's batch): it waits until each is delivered or given up (its retries are bounded), Ctrl-C leaving the
 * rest; a deployment's workers deliver them on their own, so their state is only shown.
 */
async function settleNotices(session: Session, ids: string[], signal: AbortSignal): Promise<void> {
  const { noticeOutcomes, noticeLines } = await import('../client/notice-status');
  let shown = '';
  for (;;) {
    const outcomes = await noticeOutcomes(session.client, ids).catch(() => []);
    const sending = outcomes.filter((o) => o.state === 'sending');
    if (!session.worker || !sending.length || signal.aborted) {
      for (const line of noticeLines(outcomes)) console.error(line);
      if (sending.length && session.worker)
        console.error(
          'Stopped waiting: notices not yet delivered go when a worker runs on this queue again.',
        );
      return;
    }
    const line = noticeLines(sending).join('; ');
    if (line !== shown) console.error(`${line} (waiting; Ctrl-C stops waiting)`);
    shown = line;
    await new Promise((r) => setTimeout(r, 1000));
  }
}
