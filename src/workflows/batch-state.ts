// Over 400 lines: one state machine whose rules share its fields (window, gate, pause, guard rails, carry).
// The state of a batch run and the rules that change it: the window of prompts in flight, the 429 gate, pause
// and resume, the guard rails, and what is carried across continue-as-new. Plain methods and no Temporal
// calls: the workflow (batch.ts) turns the effects into commands, in the order this class asks for them, and
// the unit tests drive it directly.
import { CAPACITY_RETRY_AFTER_MS } from '../contract/failures';
import type { PromptSubmitOutcome } from '../contract/messages';
import { CapacityGate } from './capacity-gate';
import type { BatchCarry, BatchCounts, BatchInput, BatchResult, PauseKind } from '../contract/batch';
import { concurrencyProblem, unreachableRetryMs } from '../contract/batch-options';
import type { BatchProgress } from '../contract/progress';
import type { PromptResult } from '../contract/prompt';
import type { PriorOutcome } from '../contract/rows';
import type { NoticePause } from '../contract/notice';

/** What a state change asks the workflow to do, synchronously and in this order. */
export interface BatchEffects {
  /** Set the batch's VidbatchState search attribute. */
  setState(state: string): void;
  /** Tell a blocked prompt to try again. */
  unblock(rowId: string): void;
  /** The batch was resumed (what waited on the pause may go on). */
  resumed?(): void;
  /** Call `fire` after `ms` (a durable timer; the capacity gate's). */
  timer?(ms: number, fire: () => void): void;
  /** The batch paused for a reason a person must act on: the `n`-th such pause of its life (a notice). */
  needsPerson?(kind: NoticePause, reason: string, n: number): void;
}

/** Notices the batch keeps the ids of (for `status`): its end and the pauses before it. */
const MAX_NOTICES_SHOWN = 10;

/** Pauses a person must act on: told once each (an operator's own pause, and one that lifts by itself, are not). */
const PERSON_PAUSES: ReadonlySet<PauseKind> = new Set<PauseKind>(['key', 'breaker', 'input', 'recording']);

/** Guard rails on the failure rate only count once this many rows have finished. */
const MIN_ROWS_FOR_RATE = 10;

export class BatchState {
  readonly batchId: string;
  readonly totalRows: number;
  /** Index of the first row not yet started; rows start in file order. */
  nextRow: number;
  concurrency: number;
  pausedReason: string | null;
  /** What paused the batch; null when it is not paused. */
  pauseKind: PauseKind | null;
  /** Submits in a row whose outcome was unknown (reset by one that brought a job id, and by resume). */
  unknownInARow: number;
  /** Pauses a person had to act on, over the batch's life (each one's notice is told once). */
  personPauses: number;
  /** The notices started, the latest last (the last few: `status` shows them). */
  readonly notices: string[];
  /**
   * --max-submissions counts POSTs over the batch's whole life: earlier runs' (from the rows' prior
   * outcomes), this run's as prompts report them, and one for each prompt yet to send its first.
   */
  private posts: number;
  private readonly awaitingPost = new Set<string>();
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
  /** Rows an earlier run finished successfully, counted as succeeded without a prompt. */
  skipped: number;
  /** Rows recorded from another batch's job for the same request, counted as succeeded without a prompt. */
  reused: number;
  /** Rows with a submit of unknown outcome (this run's prompts, or earlier runs' for rows finished now). */
  unknownSubmitRows: number;
  /** In-flight rows whose earlier runs had an unknown submit outcome. */
  private readonly priorUnknown = new Set<string>();
  /** Why the gateway asked to wait, from the prompt that last moved the gate. */
  private holdReasonText: string | null = null;
  /** Moves on every change; the workflow's main loop sleeps until it does. */
  tick = 0;
  /** Submissions wait for a slot under a gateway's running-jobs cap (null until enabled). */
  capacityGate: CapacityGate | null = null;

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
      stoppedReason: null,
      skipped: 0,
      reused: 0,
      unknownSubmitRows: 0,
      pauseKind: null,
      unknownInARow: 0,
      personPauses: 0,
      notices: [],
      posts: 0,
      window: {
        inFlight: [],
        awaitingPost: [],
        blocked: [],
        priorUnknown: [],
        rateLimited: [],
        holdReason: null,
        capacityGate: null,
        results: [],
      },
    };
    this.batchId = input.batchId;
    this.totalRows = input.totalRows;
    this.nextRow = carry.nextRow;
    this.concurrency = carry.concurrency;
    this.pausedReason = carry.pausedReason;
    this.pauseKind = carry.pausedReason ? carry.pauseKind : null;
    this.unknownInARow = carry.unknownInARow;
    this.personPauses = carry.personPauses;
    this.notices = [...carry.notices];
    this.posts = carry.posts;
    this.gateUntil = carry.gateUntil;
    this.manifestPath = carry.manifestPath;
    this.stoppedReason = carry.stoppedReason;
    this.counts = { ...carry.counts };
    this.startedAt = carry.startedAt;
    this.runs = carry.runs;
    this.skipped = carry.skipped;
    this.reused = carry.reused;
    this.unknownSubmitRows = carry.unknownSubmitRows;
    const { window } = carry;
    for (const rowId of window.inFlight) this.inFlight.add(rowId);
    for (const rowId of window.awaitingPost) this.awaitingPost.add(rowId);
    for (const rowId of window.blocked) this.blocked.add(rowId);
    for (const rowId of window.priorUnknown) this.priorUnknown.add(rowId);
    for (const [rowId, until] of window.rateLimited) this.rateLimited.set(rowId, until);
    this.holdReasonText = window.holdReason;
  }

  changed(): void {
    this.tick += 1;
  }

  /** Turns the capacity gate on (the workflow does, once per run; needs the `timer` effect). */
  enableCapacityGate(now: number): void {
    const { effects } = this;
    if (!effects.timer) throw new Error('the capacity gate needs a timer');
    this.capacityGate = new CapacityGate(
      {
        unblock: (rowId) => this.effects.unblock(rowId),
        timer: (ms, fire) =>
          effects.timer!(ms, () => {
            fire();
            this.changed(); // a probe slot may let a new prompt start
          }),
      },
      this.awaitingPost,
      () => !this.allStarted(),
    );
    const saved = this.input.carry?.window.capacityGate;
    if (saved) this.capacityGate.restore(saved, now);
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
      pauseKind: this.pauseKind,
      blocked: this.blocked.size,
      concurrency: this.concurrency,
      startedAt: this.startedAt,
      done: this.counts.succeeded + this.counts.failed >= this.totalRows,
      manifestPath: this.manifestPath,
      stoppedReason: this.stoppedReason,
      skipped: this.skipped,
      reused: this.reused,
      unknownSubmitRows: this.unknownSubmitRows,
      holdUntil: this.gateUntil > now ? this.gateUntil : null,
      holdReason: this.gateUntil > now ? this.holdReason(now) : null,
      capacityGate: this.capacityGate?.describe(now) ?? null,
      ...(this.notices.length ? { notices: [...this.notices] } : {}),
    };
  }

  /** "the gateway asked to wait until 03:10 UTC" (with the date when it is not within a day). */
  private holdReason(now: number): string {
    if (this.holdReasonText) return this.holdReasonText;
    const iso = new Date(this.gateUntil).toISOString();
    const when =
      this.gateUntil - now > 20 * 3600_000 ? `${iso.slice(0, 10)} ${iso.slice(11, 16)}` : iso.slice(11, 16);
    return `the gateway asked to wait until ${when} UTC (Retry-After)`;
  }

  /** An operator's pause: no new prompts; those in flight go on. */
  pause(reason: string, kind: PauseKind = 'operator'): void {
    const before = this.pauseKind;
    this.pausedReason = reason || 'paused by operator';
    this.pauseKind = kind;
    this.effects.setState('paused');
    this.toldIfPerson(before);
    this.changed();
  }

  /** A notice was started: kept for `status` (the last few). */
  noticeStarted(id: string): void {
    this.notices.push(id);
    if (this.notices.length > MAX_NOTICES_SHOWN) this.notices.shift();
  }

  /** A pause that now needs a person, and did not before: its notice, once. */
  private toldIfPerson(before: PauseKind | null): void {
    const kind = this.pauseKind;
    if (!kind || kind === before || !PERSON_PAUSES.has(kind)) return;
    this.personPauses += 1;
    this.effects.needsPerson?.(kind as NoticePause, this.pausedReason!, this.personPauses);
  }

  /** A pause of `kind` unless the batch is already paused (the first reason stays, with its time). */
  private pauseFor(kind: PauseKind, reason: string): void {
    if (this.pausedReason) return;
    this.pause(reason, kind);
  }

  /** Ends a pause, and unblocks the prompts that waited on it. */
  resume(): void {
    this.pausedReason = null;
    this.pauseKind = null;
    this.unknownInARow = 0;
    for (const rowId of this.blocked) this.effects.unblock(rowId);
    this.blocked.clear();
    this.effects.setState('running');
    this.effects.resumed?.();
    this.changed();
  }

  /** Finished rows could not be written to the manifest: pause until someone fixes it. */
  recordingFailed(message: string): void {
    this.pauseFor(
      'recording',
      `finished rows could not be written to the manifest (${message}); fix it (e.g. the worker's VIDBATCH_OUT_ROOT or disk), then resume the batch`,
    );
  }

  /** The batch's CSV could not be read (changed, or not allowed on the worker that tried): pause with why. */
  inputFailed(message: string): void {
    this.pauseFor('input', message);
  }

  /**
   * What became of a prompt's submit. Unknown outcomes in a row trip the breaker: the
   * batch pauses submitting, and prompts about to resend wait for resume. Submits that cannot be sent pause
   * the batch as unreachable; the first submit that goes through again lifts that pause by itself.
   */
  submitOutcome(report: PromptSubmitOutcome, now: number): void {
    const { rowId } = report;
    if (!this.inFlight.has(rowId)) return;
    if (report.outcome === 'capacity') {
      // A submit refused with 429: nothing was made; the gate tells a capacity refusal from a rate limit (the
      // prompt then goes again after the Retry-After, and no new prompt starts before).
      const retryAfterMs = report.retryAfterMs ?? 0;
      const gate = this.capacityGate;
      if (!gate) this.effects.unblock(rowId);
      else if (!gate.rateLimited(rowId, retryAfterMs, now, CAPACITY_RETRY_AFTER_MS))
        this.promptRateLimited(rowId, now + retryAfterMs);
      this.changed();
      return;
    }
    if (report.outcome !== 'unreachable') {
      this.posts += 1;
      this.awaitingPost.delete(rowId);
    }
    if (report.outcome === 'sent') {
      this.unknownInARow = 0;
      if (this.pauseKind === 'unreachable') this.resume();
      if (this.capacityGate) {
        this.capacityGate.sent(rowId, now);
        this.changed(); // the ramp may let more prompts start
      }
      return;
    }
    if (report.outcome === 'unreachable') {
      const since = new Date(report.sinceMs ?? now).toISOString().slice(11, 16);
      this.pauseFor(
        'unreachable',
        `gateway unreachable since ${since} UTC: ${report.reason ?? 'nothing could be sent'}; ` +
          `vidbatch tries again every ${Math.round(unreachableRetryMs(this.input.options.unreachablePauseMs) / 1000)} s ` +
          'and goes on by itself when it answers (or resume the batch)',
      );
      this.blocked.add(rowId);
      this.changed();
      return;
    }
    this.unknownInARow += 1;
    const limit = this.input.options.pauseAfterUnknown;
    if (limit > 0 && this.unknownInARow >= limit)
      this.pauseFor(
        'breaker',
        `${this.unknownInARow} submits in a row had an unknown outcome: paused so as not to pay for jobs ` +
          'vidbatch cannot see; check the gateway, then resume the batch',
      );
    if (report.waiting) {
      if (this.pauseKind === 'breaker') this.blocked.add(rowId);
      else this.effects.unblock(rowId);
    }
    this.changed();
  }

  /** Throws what is wrong with a window size (the update's validator), or nothing. */
  static checkConcurrency(n: number): void {
    const problem = concurrencyProblem(n);
    if (problem) throw new Error(`concurrency ${problem}`);
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
    const before = this.pauseKind;
    this.pausedReason =
      `the gateway refused the API key (${reason}); run the file again with a working key ` +
      '(or fix the key the workers read, then `vidbatch resume` the batch)';
    this.pauseKind = 'key';
    this.toldIfPerson(before);
    this.changed();
  }

  /** A prompt's submit got 429: no new prompt starts before `untilMs`. */
  promptRateLimited(rowId: string, untilMs: number, reason?: string): void {
    if (untilMs >= this.gateUntil) this.holdReasonText = reason ?? null;
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
    const { maxFailures, maxFailureRate } = this.input.options;
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
    } else {
      this.checkSpendCap();
    }
  }

  /** The spend cap counts every POST of the batch's life, so rows an earlier run finished count too. */
  private checkSpendCap(): void {
    const { maxSubmissions } = this.input.options;
    if (maxSubmissions === undefined || this.nextRow >= this.totalRows) return;
    const submitted = this.posts + this.awaitingPost.size;
    if (submitted >= maxSubmissions)
      this.stop(`${submitted} jobs submitted (--max-submissions ${maxSubmissions})`);
  }

  /** The next row's prompt starts (the workflow starts its child right after). */
  started(rowId: string, prior?: PriorOutcome): void {
    this.inFlight.add(rowId);
    if (prior?.unknownSubmits) this.priorUnknown.add(rowId);
    this.posts += prior?.posts ?? 0;
    // A row with a known job checks it first: it sends a POST only if it reports one.
    if (!prior?.jobId) this.awaitingPost.add(rowId);
    this.capacityGate?.started(rowId);
    this.nextRow += 1;
    this.startedThisRun += 1;
    this.checkGuardRails();
  }

  /** The next row already succeeded in an earlier run: counted as succeeded, no prompt, not recorded again. */
  skip(prior: PriorOutcome): void {
    this.posts += prior.posts ?? 0;
    this.nextRow += 1;
    this.skipped += 1;
    this.counts.succeeded += 1;
    if (prior.unknownSubmits) this.unknownSubmitRows += 1;
    this.checkSpendCap();
    this.changed();
  }

  /** The next row's request was paid for by another batch of the output root: recorded from its job, no prompt. */
  reuse(result: PromptResult): void {
    this.nextRow += 1;
    // A failed one (refused for its content, its job forgotten) is a failure here too, not a reused video.
    if (result.status === 'succeeded') this.reused += 1;
    this.counts[result.status] += 1;
    if (result.unknownSubmits) this.unknownSubmitRows += 1;
    this.changed();
  }

  /** The next row ended `submit_unknown` in an earlier run: counted as failed again, not re-sent. */
  skipUnknown(prior: PriorOutcome): void {
    this.posts += prior.posts ?? 0;
    this.nextRow += 1;
    this.counts.failed += 1;
    this.unknownSubmitRows += 1;
    this.checkSpendCap();
    this.changed();
  }

  /**
   * The next row's content was refused by the gateway in an earlier run: counted as failed again, not re-sent
   * (unchanged, it would be refused again), not recorded again.
   */
  skipRefused(prior: PriorOutcome): void {
    this.posts += prior.posts ?? 0;
    this.nextRow += 1;
    this.counts.failed += 1;
    if (prior.unknownSubmits) this.unknownSubmitRows += 1;
    this.checkSpendCap();
    this.changed();
  }

  /** A prompt ended; the workflow records its result after this. */
  finished(result: PromptResult): void {
    this.inFlight.delete(result.rowId);
    this.awaitingPost.delete(result.rowId);
    this.blocked.delete(result.rowId);
    this.rateLimited.delete(result.rowId);
    this.capacityGate?.finished(result.rowId);
    if (this.priorUnknown.delete(result.rowId) || (result.unknownSubmits ?? 0) > 0)
      this.unknownSubmitRows += 1;
    this.counts[result.status] += 1;
    this.checkGuardRails();
  }

  /** This run has started all it should: it continues as new, and the prompts in flight go on. */
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
      this.inFlight.size < this.concurrency &&
      (this.capacityGate?.mayStart() ?? true)
    );
  }

  gateHeld(now: number): boolean {
    return this.gateUntil > now;
  }

  allStarted(): boolean {
    return this.nextRow >= this.totalRows || this.stoppedReason !== null;
  }

  /** What the next run starts from: the counts, and the window as it is (with `results` not yet recorded). */
  carry(results: PromptResult[]): BatchCarry {
    return {
      nextRow: this.nextRow,
      counts: this.counts,
      startedAt: this.startedAt,
      concurrency: this.concurrency,
      pausedReason: this.pausedReason,
      pauseKind: this.pauseKind,
      unknownInARow: this.unknownInARow,
      personPauses: this.personPauses,
      notices: this.notices,
      posts: this.posts,
      gateUntil: this.gateUntil,
      manifestPath: this.manifestPath,
      runs: this.runs + 1,
      stoppedReason: this.stoppedReason,
      skipped: this.skipped,
      reused: this.reused,
      unknownSubmitRows: this.unknownSubmitRows,
      window: {
        inFlight: [...this.inFlight],
        awaitingPost: [...this.awaitingPost],
        blocked: [...this.blocked],
        priorUnknown: [...this.priorUnknown],
        rateLimited: [...this.rateLimited],
        holdReason: this.holdReasonText,
        capacityGate: this.capacityGate?.save() ?? null,
        results,
      },
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
      skipped: this.skipped,
      reused: this.reused,
      unknownSubmitRows: this.unknownSubmitRows,
      ...(this.notices.length ? { notices: [...this.notices] } : {}),
    };
  }
}
