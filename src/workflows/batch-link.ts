// A prompt's link to its batch: the signals it sends (a refused key, what became of a submit, a 429) and the
// waits for the batch's go (`unblock`). Time spent waiting for a go is counted in the prompt's state (it moves
// the job's deadline). A prompt run on its own (no parent) waits only its Retry-After.
import {
  CancellationScope,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
  type ExternalWorkflowHandle,
} from '@temporalio/workflow';
import type { PromptResult } from '../contract/prompt';
import {
  promptBlockedSignal,
  promptFinishedSignal,
  promptSubmitOutcomeSignal,
  jobFollowedSignal,
  unblockSignal,
  type JobFollowed,
  type PromptSubmitOutcome,
} from '../contract/messages';
import { StateAttr } from '../contract/search-attributes';
import { PromptState } from './prompt-state';

export class BatchLink {
  /** The batch that started this prompt (absent when run on its own). */
  private readonly batch: ExternalWorkflowHandle | undefined;
  private unblocked = false;
  /** Other batches' rows that follow a job of this row (jobFollowedSignal): never stopped under them. */
  readonly followers: JobFollowed[] = [];

  constructor(private readonly state: PromptState) {
    const parent = workflowInfo().parent;
    this.batch = parent ? getExternalWorkflowHandle(parent.workflowId) : undefined;
    setHandler(unblockSignal, () => void (this.unblocked = true));
    setHandler(jobFollowedSignal, (f) => void this.followers.push(f));
  }

  /** Where the submit activity reports a job id (SubmitInput.reportTo): the batch's current run. */
  reportTo(): { reportTo?: string } {
    return this.batch ? { reportTo: this.batch.workflowId } : {};
  }

  private get rowId(): string {
    return this.state.input.row.id;
  }

  /**
   * The row ended: its result goes to the batch's current run, even from a cancelled prompt. A batch that is
   * gone (terminated) cannot hear it; its re-run reads the jobs journal instead.
   */
  async ended(result: PromptResult): Promise<void> {
    const { batch } = this;
    if (!batch) return;
    await CancellationScope.nonCancellable(() => batch.signal(promptFinishedSignal, result)).catch(
      () => undefined,
    );
  }

  /** 401/403: tell the batch (it pauses) and wait until it says the key was fixed. Throws when cancelled. */
  async waitForUnblock(reason: string): Promise<void> {
    const since = Date.now();
    this.unblocked = false;
    upsertSearchAttributes([{ key: StateAttr, value: 'blocked' }]);
    if (this.batch) await this.batch.signal(promptBlockedSignal, { rowId: this.rowId, reason });
    await condition(() => this.unblocked);
    this.state.unblockedAt = Date.now();
    this.state.pausedMs += Date.now() - since;
  }

  /**
   * Tells the batch what became of a submit (the breaker, the unreachable pause). With `wait`, then waits for
   * the batch's go: at once unless the batch paused, or after `timeoutMs` at most. Throws when cancelled.
   */
  async report(
    outcome: Omit<PromptSubmitOutcome, 'rowId'>,
    wait: boolean,
    timeoutMs?: number,
  ): Promise<void> {
    if (!this.batch) return;
    const since = Date.now();
    this.unblocked = false;
    try {
      await this.batch.signal(promptSubmitOutcomeSignal, { rowId: this.rowId, ...outcome });
    } catch (err) {
      // A report is advice: a cancelled batch, or one that is gone, must not fail the row (or lose its job
      // id); only a wait that was asked for hears of the cancellation.
      if (wait && isCancellation(err)) throw err;
      return;
    }
    if (!wait) return;
    if (timeoutMs === undefined) await condition(() => this.unblocked);
    else await condition(() => this.unblocked, timeoutMs);
    this.state.pausedMs += Date.now() - since;
  }

  /**
   * A submit refused with 429: tells the batch and waits for its go. Under a running-jobs cap that comes when
   * one of the batch's jobs finishes or a Retry-After has passed; under a rate limit, after the Retry-After.
   * At most PromptState.slotWaitMs (then it tries again, keeping its place). Without a batch to ask, sleeps
   * the Retry-After. Throws when cancelled.
   */
  async waitForSlot(retryAfterMs: number): Promise<void> {
    this.unblocked = false;
    try {
      if (!this.batch) throw new Error('no batch');
      await this.batch.signal(promptSubmitOutcomeSignal, {
        rowId: this.rowId,
        outcome: 'capacity',
        retryAfterMs,
        waiting: true,
      });
    } catch (err) {
      if (isCancellation(err)) throw err;
      await sleep(retryAfterMs, { summary: '429: waiting as Retry-After asked' });
      return;
    }
    await condition(() => this.unblocked, PromptState.slotWaitMs(retryAfterMs));
  }
}
