// Late videos: a row that ended `deadline_exceeded` or `cancelled` with a job id still has a job that may
// finish and be billed. Its prompt has told the batch of the row's end (on time: the batch's counts and its
// end never wait for this), and then keeps checking the job, slowly and for a bounded time (late-state.ts):
// the same poll activity as any row's checks, on the gateway queue within the rate budget, its attempts the
// checks (server-side waits, no history events per check). A video that arrives is downloaded and verified
// as any row's, and recorded in the manifest as the row's new state (`arrivedLate`) through the activity the
// batch records with, so `status`, `results`, the ledger and re-runs see the row as succeeded and pay nothing
// again. A job that fails, or is still unfinished when the window ends, records nothing more.
import {
  CancellationScope,
  isCancellation,
  log,
  proxyActivities,
  setHandler,
  sleep,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { PollOutcome } from '../contract/jobs';
import { RETRY_POLICIES } from '../contract/failures';
import { rowEndedQuery } from '../contract/messages';
import { arrivedLateResult, type PromptInput, type PromptResult } from '../contract/prompt';
import type { gatewayActivityOptions } from '../contract/rate-budget';
import { noticeId } from '../contract/notice';
import { startNotice } from './notice';
import { lateRecordRetryMs, lateRetryMs, latePoll, lateStep, lateWatch, type LateWatch } from './late-state';
import { activityError, setState } from './prompt-outcome';
import type { PromptState } from './prompt-state';

/** What the late watch needs of the prompt's run (prompt.ts PromptRun). */
export interface LateRun {
  readonly input: PromptInput;
  readonly state: PromptState;
  /** The gateway queue's options of this prompt (its batch's priority and fairness key). */
  readonly gateway: ReturnType<typeof gatewayActivityOptions>;
  /** The job completed: its video fetched and verified as any row's; the result that keeps it. */
  keep(outcome: PollOutcome): Promise<PromptResult>;
}

/**
 * Watches the job of a row that just ended (`ended`, already told to the batch) when its video may still
 * arrive; returns the row's new state once a late video is kept and recorded, else undefined (nothing to watch,
 * the job failed, the window ended, or the prompt was cancelled while it watched).
 */
export async function watchLateVideo(run: LateRun, ended: PromptResult): Promise<PromptResult | undefined> {
  const watch = lateWatch(run.input, ended);
  if (!watch) return undefined;
  // `VidbatchState = 'late'`: a re-run of the batch, `download` and the batch's look at ended prompts find it.
  setState('late');
  setHandler(rowEndedQuery, () => ended);
  const late = new LateVideo(run, ended, watch);
  try {
    // A cancelled row's prompt is cancelled already: its watch runs outside that cancellation, bounded by the
    // window. A row that ended on its deadline is watched in the prompt's own scope: cancelling the prompt
    // (the Web UI, `temporal workflow cancel`) ends its watch.
    return ended.errorCode === 'cancelled'
      ? await CancellationScope.nonCancellable(() => late.watch())
      : await late.watch();
  } catch (err) {
    if (!isCancellation(err)) throw err;
    setState(ended.status);
    return undefined;
  }
}

class LateVideo {
  constructor(
    private readonly run: LateRun,
    private readonly ended: PromptResult,
    private readonly late: LateWatch,
  ) {}

  async watch(): Promise<PromptResult | undefined> {
    const { run, late } = this;
    const { pollJob } = proxyActivities<Activities>({
      ...run.gateway,
      startToCloseTimeout: run.input.activityTimeoutMs,
      retry: RETRY_POLICIES.pollJob(late.checkMs),
    });
    for (;;) {
      let outcome: PollOutcome;
      try {
        outcome = await pollJob.executeWithOptions(
          { summary: `late checks of job ${late.jobId} (row ended ${late.endedAs})` },
          [
            {
              jobId: late.jobId,
              submittedAt: late.fromMs,
              poll: latePoll(late),
              deadlineAt: late.untilMs,
              // Not a fresh go: a key the worker refuses stays refused for this check until the key changes.
              unblockedAt: run.state.unblockedAt,
              late: true,
              ...(run.input.download ? { download: run.state.videoTarget() } : {}),
            },
          ],
        );
      } catch (err) {
        if (isCancellation(err)) throw err;
        // A refused key: tried again later while the window lasts. Anything else no retry changes: the row
        // stays as it ended.
        const wait =
          run.state.pollFailed(activityError(err)) === 'blocked' ? lateRetryMs(late, Date.now()) : undefined;
        if (wait === undefined) return this.over(`late checks of job ${late.jobId} stopped: ${String(err)}`);
        await sleep(wait, { summary: `late check of job ${late.jobId}: waiting for a working API key` });
        continue;
      }
      if (lateStep(outcome) === 'over')
        return this.over(
          `job ${late.jobId} ${outcome.errorCode === 'deadline_exceeded' ? 'was still unfinished when its late window ended' : `ended without a video (${outcome.errorCode})`}`,
        );
      return this.record(arrivedLateResult(await run.keep(outcome), this.ended));
    }
  }

  /** Nothing more is recorded: the row stays as it ended. */
  private over(why: string): undefined {
    setState(this.ended.status);
    log.info(`row ${this.ended.rowId}: ${why}; the row stays ${this.ended.errorCode}`);
    return undefined;
  }

  /**
   * The row's new state goes to the manifest after the line it supersedes (`ended`, written again unless it is
   * there: appends skip a line already written), through the activity the batch records with.
   */
  private async record(kept: PromptResult): Promise<PromptResult | undefined> {
    const { input } = this.run;
    const { recordResults } = proxyActivities<Activities>({
      startToCloseTimeout: input.activityTimeoutMs,
      retry: RETRY_POLICIES.batch,
    });
    const keptAt = Date.now();
    for (;;) {
      try {
        await recordResults.executeWithOptions({ summary: `record the late video of row ${kept.rowId}` }, [
          {
            batchId: input.batchId,
            ...(input.outDir ? { outDir: input.outDir } : {}),
            results: [this.ended, kept],
          },
        ]);
        return await this.arrived(kept);
      } catch (err) {
        if (isCancellation(err)) throw err;
        const wait = lateRecordRetryMs(this.late, keptAt, Date.now());
        if (wait === undefined) {
          log.warn(
            `row ${kept.rowId}: its late video is on disk (${kept.file ?? kept.url}) but could not be recorded ` +
              `(${String(err)}); \`vidbatch download\` records it`,
          );
          setState(this.ended.status);
          return undefined;
        }
        await sleep(wait, { summary: `record the late video of row ${kept.rowId} again` });
      }
    }
  }

  /**
   * A late video was kept: downloaded, verified and recorded in the manifest as the row's new state (`kept`,
   * with `arrivedLate`). Called once per late video, after it is recorded: the one place where a "late video
   * arrived" notice belongs. Returns the row's new state, the prompt workflow's result.
   */
  private async arrived(kept: PromptResult): Promise<PromptResult> {
    const reason = `row ${kept.rowId}: the video of job ${this.late.jobId} arrived after the row ended ${this.late.endedAs}; recorded`;
    log.info(reason);
    const { input } = this.run;
    if (input.notice?.to.length)
      await startNotice({
        id: noticeId(input.batchId, `late-${this.late.jobId}`),
        event: 'late_video',
        batchId: input.batchId,
        csvPath: input.notice.csvPath,
        ...(input.outDir ? { outDir: input.outDir } : {}),
        reason,
        to: input.notice.to,
        at: new Date().toISOString(),
      });
    return kept;
  }
}
