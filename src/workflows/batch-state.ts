// The state of a batch run and the rules that change it: the window of prompts in flight, the 429 gate, pause
// and resume, the guard rails, and what is carried across continue-as-new. Plain methods and no Temporal
// calls: the workflow (batch.ts) turns the effects into commands, in the order this class asks for them, and
// the unit tests drive it directly.
import type {
  BatchCarry,
  BatchCounts,
  BatchInput,
  BatchProgress,
  BatchResult,
  PromptResult,
} from '../contract/types';

/** What a state change asks the workflow to do, synchronously and in this order. */
export interface BatchEffects {
  /** Set the batch's VidbatchState search attribute. */
  setState(state: string): void;
  /** Tell a blocked prompt to try again. */
  unblock(rowId: string): void;
}

/** Guard rails on the failure rate only count once this many rows have finished. */
const MIN_ROWS_FOR_RATE = 10;

export class BatchState {
  readonly batchId: string;
  readonly totalRows: number;
  /** Index of the first row not yet started; rows start in file order. */
  nextRow: number;
  concurrency: number;
  pausedReason: string | null;
  /** Epoch ms until which no new prompt starts after a 429. */
  gateUntil: number;
  manifestPath: string;
  stoppedReason: string | null;
  readonly counts: BatchCounts;
  readonly inFlight = new Set<string>();
  /** Prompts waiting for `unblock` after a 401/403. */
  readonly blocked = new Set<string>();
  /** Prompts sleeping for a Retry-After, and until when. */
  private readonly rateLimited = new Map<string, number>();
  private readonly startedAt: number;
  private readonly runs: number;
  private startedThisRun = 0;
  /** Moves on every change; the workflow's main loop sleeps until it does. */
  tick = 0;

  constructor(
    private readonly input: Pick<BatchInput, 'batchId' | 'totalRows' | 'options' | 'carry'>,
    now: number,
    private readonly effects: BatchEffects,
  ) {
    const carry: BatchCarry = input.carry ?? {
      nextRow: 0,
      counts: { succeeded: 0, failed: 0 },
      startedAt: now,
      concurrency: input.options.concurrency,
      pausedReason: null,
      gateUntil: 0,
      manifestPath: '',
      runs: 0,
    };
    this.batchId = input.batchId;
    this.totalRows = input.totalRows;
    this.nextRow = carry.nextRow;
    this.concurrency = carry.concurrency;
    this.pausedReason = carry.pausedReason;
    this.gateUntil = carry.gateUntil;
    this.manifestPath = carry.manifestPath;
    this.stoppedReason = carry.stoppedReason ?? null;
    this.counts = { ...carry.counts };
    this.startedAt = carry.startedAt;
    this.runs = carry.runs;
  }

  changed(): void {
    this.tick += 1;
  }

  progress(now: number): BatchProgress {
    return {
      batchId: this.batchId,
      total: this.totalRows,
      started: this.nextRow,
      inFlight: this.inFlight.size,
      succeeded: this.counts.succeeded,
      failed: this.counts.failed,
      rateLimited: [...this.rateLimited.values()].filter((until) => until > now).length,
      rateLimitedUntil: this.gateUntil > now ? this.gateUntil : null,
      pausedReason: this.pausedReason,
      blocked: this.blocked.size,
      concurrency: this.concurrency,
      startedAt: this.startedAt,
      done: this.counts.succeeded + this.counts.failed >= this.totalRows,
      manifestPath: this.manifestPath,
      stoppedReason: this.stoppedReason,
    };
  }

  /** An operator's pause: no new prompts; those in flight go on. */
  pause(reason: string): void {
    this.pausedReason = reason || 'paused by operator';
    this.effects.setState('paused');
    this.changed();
  }

  /** Ends a pause, and unblocks the prompts that waited on it. */
  resume(): void {
    this.pausedReason = null;
    for (const rowId of this.blocked) this.effects.unblock(rowId);
    this.blocked.clear();
    this.effects.setState('running');
    this.changed();
  }

  /** Throws what is wrong with a window size (the update's validator), or nothing. */
  static checkConcurrency(n: number): void {
    if (!Number.isInteger(n) || n < 1 || n > 10_000)
      throw new Error('concurrency must be a whole number from 1 to 10000');
  }

  setConcurrency(n: number): void {
    this.concurrency = n;
    this.changed();
  }

  /** A prompt's call got 401/403: the batch pauses until the key is fixed and someone resumes it. */
  promptBlocked(rowId: string, reason: string): void {
    if (!this.inFlight.has(rowId)) return;
    this.blocked.add(rowId);
    if (!this.pausedReason) this.effects.setState('paused');
    this.pausedReason = `the gateway refused the API key (${reason}); fix the key, then resume the batch`;
    this.changed();
  }

  /** A prompt's submit got 429: no new prompt starts before `untilMs`. */
  promptRateLimited(rowId: string, untilMs: number): void {
    this.gateUntil = Math.max(this.gateUntil, untilMs);
    this.rateLimited.set(rowId, untilMs);
    this.changed();
  }

  /** Guard rails: once crossed, no new submissions; prompts in flight finish; the batch ends cleanly. */
  stop(reason: string): void {
    if (this.stoppedReason) return;
    this.stoppedReason = reason;
    this.effects.setState('stopped');
    this.changed();
  }

  /**
   * The batch deadline: stops the batch when it has passed, else returns how long until it does (for a
   * timer); undefined when there is none, or the batch already stopped.
   */
  untilDeadline(now: number): number | undefined {
    const { deadlineAt } = this.input.options;
    if (deadlineAt === undefined || this.stoppedReason) return undefined;
    const left = deadlineAt - now;
    if (left > 0) return left;
    this.deadlinePassed();
    return undefined;
  }

  deadlinePassed(): void {
    this.stop('the batch deadline passed');
  }

  private checkGuardRails(): void {
    const { maxFailures, maxFailureRate, maxSubmissions } = this.input.options;
    const { failed } = this.counts;
    const finishedRows = this.counts.succeeded + failed;
    if (maxFailures !== undefined && failed >= maxFailures) {
      this.stop(`${failed} rows failed (--max-failures ${maxFailures})`);
    } else if (
      maxFailureRate !== undefined &&
      finishedRows >= MIN_ROWS_FOR_RATE &&
      failed / finishedRows > maxFailureRate
    ) {
      this.stop(`${failed} of ${finishedRows} finished rows failed (--max-failure-rate ${maxFailureRate})`);
    } else if (
      maxSubmissions !== undefined &&
      this.nextRow >= maxSubmissions &&
      this.nextRow < this.totalRows
    ) {
      this.stop(`${this.nextRow} jobs submitted (--max-submissions ${maxSubmissions})`);
    }
  }

  /** The next row's prompt starts (the workflow starts its child right after). */
  started(rowId: string): void {
    this.inFlight.add(rowId);
    this.nextRow += 1;
    this.startedThisRun += 1;
    this.checkGuardRails();
  }

  /** A prompt ended; the workflow records its result after this. */
  finished(result: PromptResult): void {
    this.inFlight.delete(result.rowId);
    this.blocked.delete(result.rowId);
    this.rateLimited.delete(result.rowId);
    this.counts[result.status] += 1;
    this.checkGuardRails();
  }

  /** This run has started all it should: continue as new once its prompts are done. */
  runFull(continueAsNewSuggested: boolean): boolean {
    return this.startedThisRun >= this.input.options.promptsPerRun || continueAsNewSuggested;
  }

  /** Whether the next of `buffered` rows may start now (the 429 gate aside, which the workflow sleeps out). */
  canStart(buffered: number, runFull: boolean): boolean {
    return (
      buffered > 0 &&
      !runFull &&
      !this.pausedReason &&
      !this.stoppedReason &&
      this.inFlight.size < this.concurrency
    );
  }

  gateHeld(now: number): boolean {
    return this.gateUntil > now;
  }

  allStarted(): boolean {
    return this.nextRow >= this.totalRows || this.stoppedReason !== null;
  }

  /** What the next run starts from. */
  carry(): BatchCarry {
    return {
      nextRow: this.nextRow,
      counts: this.counts,
      startedAt: this.startedAt,
      concurrency: this.concurrency,
      pausedReason: this.pausedReason,
      gateUntil: this.gateUntil,
      manifestPath: this.manifestPath,
      runs: this.runs + 1,
      stoppedReason: this.stoppedReason,
    };
  }

  result(): BatchResult {
    return {
      batchId: this.batchId,
      total: this.totalRows,
      succeeded: this.counts.succeeded,
      failed: this.counts.failed,
      manifestPath: this.manifestPath,
      notStarted: this.totalRows - this.nextRow,
      ...(this.stoppedReason ? { stoppedReason: this.stoppedReason } : {}),
    };
  }
}
