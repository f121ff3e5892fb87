// Group commit of finished rows into the manifest: one recordResults activity per group of at most
// RESULT_GROUP rows or RESULT_GROUP_MS, at once when nothing else is in flight, one group at a time. With
// `timer` a durable timer flushes a group RESULT_GROUP_MS after the last one even when no other row finishes
// (a paused batch's paid videos reach the file), and with `failed` a group that fails for good is reported
// (the batch pauses) and waits for `retry()`; without it, a group that fails is put back in front and goes
// with the next. With `maxGroupBytes` a group is also cut by its JSON size, so big rows never make a payload
// near Temporal's limit.
import type { PromptResult } from '../contract/prompt';

const RESULT_GROUP = 25;
const RESULT_GROUP_MS = 10_000;

/** Appends a group to the manifest (the recordResults activity); returns where the manifest is. */
export type RecordGroup = (results: PromptResult[], summary: string) => Promise<{ manifestPath: string }>;

export interface RecorderOptions {
  /** Prompts still in flight. */
  inFlight: () => number;
  onRecorded: (manifestPath: string) => void;
  /** Called when recording ends, so the workflow's main loop looks again. */
  changed: () => void;
  now?: () => number;
  /** Most bytes of results JSON per group (at least one result); absent: no size cut. */
  maxGroupBytes?: number;
  /** A durable timer (workflow sleep); a pending group is flushed when it fires. */
  timer?: (ms: number) => Promise<void>;
  /** A group could not be recorded (its retries ran out): nothing is recorded again before `retry()`. */
  failed?: (message: string) => void;
}

/** UTF-8 bytes of a string, as Temporal's JSON payloads carry it (workflow code: no Buffer). */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    bytes += c < 0x80 ? 1 : c < 0x800 || (c >= 0xd800 && c < 0xe000) ? 2 : 3; // a surrogate pair: 4
  }
  return bytes;
}

/** Takes the first results of `pending` whose JSON stays within `maxBytes` (at least one); all without it. */
export function takeGroup(pending: PromptResult[], maxBytes: number | undefined): PromptResult[] {
  if (maxBytes === undefined) return pending.splice(0);
  let bytes = 2;
  let n = 0;
  while (n < pending.length) {
    bytes += utf8Length(JSON.stringify(pending[n])) + 1;
    if (bytes > maxBytes && n > 0) break;
    n += 1;
  }
  return pending.splice(0, n);
}

export class ResultRecorder {
  private pending: PromptResult[] = [];
  private recording = false;
  private timerSet = false;
  /** Why the last group could not be recorded; no group goes before `retry()`. */
  private failure: string | null = null;
  private lastFlushAt: number;
  private readonly now: () => number;

  constructor(
    private readonly record: RecordGroup,
    private readonly options: RecorderOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.lastFlushAt = this.now();
  }

  /** A group is being recorded. */
  get busy(): boolean {
    return this.recording;
  }

  /** Nothing waits to be recorded and nothing is being recorded. */
  get idle(): boolean {
    return !this.recording && this.pending.length === 0;
  }

  add(result: PromptResult): void {
    this.pending.push(result);
    this.flush();
  }

  private due(): boolean {
    return (
      this.pending.length >= RESULT_GROUP ||
      this.now() - this.lastFlushAt >= RESULT_GROUP_MS ||
      this.options.inFlight() === 0
    );
  }

  /** Records what is pending when a group is due (or `force`), unless a group is being recorded. */
  flush(force = false): void {
    if (this.recording || this.pending.length === 0 || this.failure !== null) return;
    if (!force && !this.due()) return this.setTimer();
    const group = takeGroup(this.pending, this.options.maxGroupBytes);
    this.recording = true;
    this.lastFlushAt = this.now();
    this.record(group, `record ${group.length} finished rows`).then(
      (r) => {
        this.options.onRecorded(r.manifestPath);
        this.recording = false;
        this.flush();
        this.options.changed();
      },
      (err: unknown) => {
        this.pending = group.concat(this.pending);
        this.recording = false;
        // Cancelled with the run: nothing to pause for (recordRest records the rest).
        if (isCancelled(err)) return;
        if (this.options.failed) {
          this.failure = err instanceof Error ? messageOf(err) : String(err);
          this.options.failed(this.failure);
        }
        this.options.changed();
      },
    );
  }

  /** A group could not be recorded and waits for `retry()`. */
  get failing(): boolean {
    return this.failure !== null;
  }

  /**
   * For continue-as-new: what is pending, when nothing is being recorded and it fits one group (the next run
   * records it). Otherwise undefined, after starting to record a group unless recording failed (ask again once
   * `busy` is over, or after `retry()`).
   */
  handOver(): PromptResult[] | undefined {
    if (this.recording) return undefined;
    const group = takeGroup(this.pending, this.options.maxGroupBytes);
    if (this.pending.length === 0) return group;
    this.pending = group.concat(this.pending);
    this.flush(true);
    return undefined;
  }

  /** After a failure was fixed (the batch resumed): record what waited. */
  retry(): void {
    this.failure = null;
    this.flush(true);
  }

  /** One timer at a time, for when the pending group is due by age. */
  private setTimer(): void {
    const { timer } = this.options;
    if (!timer || this.timerSet) return;
    this.timerSet = true;
    const ms = Math.max(1, RESULT_GROUP_MS - (this.now() - this.lastFlushAt));
    timer(ms).then(
      () => {
        this.timerSet = false;
        this.flush();
      },
      () => void (this.timerSet = false), // cancelled with the run: recordRest takes over
    );
  }

  /** After a cancellation: records what is left in one last group, and waits for it. */
  async recordRest(summary: string): Promise<void> {
    while (this.pending.length)
      await this.record(takeGroup(this.pending, this.options.maxGroupBytes), summary);
  }
}

/** Whether the failure, or one of its causes, is Temporal's CancelledFailure (matched by name: imports nothing). */
function isCancelled(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = e.cause) if (e.name === 'CancelledFailure') return true;
  return false;
}

/** The innermost cause's message (an activity failure's own message only names the activity). */
function messageOf(err: Error): string {
  let e: Error = err;
  while (e.cause instanceof Error) e = e.cause;
  return e.message;
}
