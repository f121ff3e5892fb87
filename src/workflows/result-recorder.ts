// Group commit of finished rows into the manifest: one recordResults activity per group of at most
// RESULT_GROUP rows or RESULT_GROUP_MS, at once when nothing else is in flight, one group at a time. A group
// that fails is put back in front and goes with the next. Runs started before grouping (no patch marker)
// record after every prompt.
import type { PromptResult } from '../contract/types';

const RESULT_GROUP = 25;
const RESULT_GROUP_MS = 10_000;

/** Appends a group to the manifest (the recordResults activity); returns where the manifest is. */
export type RecordGroup = (results: PromptResult[], summary: string) => Promise<{ manifestPath: string }>;

export interface RecorderOptions {
  /** false: record after every prompt (runs started before the `record-results-in-groups` patch). */
  grouped: boolean;
  /** Prompts still in flight. */
  inFlight: () => number;
  onRecorded: (manifestPath: string) => void;
  /** Called when recording ends, so the workflow's main loop looks again. */
  changed: () => void;
  now?: () => number;
}

export class ResultRecorder {
  private pending: PromptResult[] = [];
  private recording = false;
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
      !this.options.grouped ||
      this.pending.length >= RESULT_GROUP ||
      this.now() - this.lastFlushAt >= RESULT_GROUP_MS ||
      this.options.inFlight() === 0
    );
  }

  /** Records what is pending when a group is due (or `force`), unless a group is being recorded. */
  flush(force = false): void {
    if (this.recording || this.pending.length === 0 || (!force && !this.due())) return;
    const group = this.pending;
    this.pending = [];
    this.recording = true;
    this.lastFlushAt = this.now();
    this.record(group, `record ${group.length} finished rows`).then(
      (r) => {
        this.options.onRecorded(r.manifestPath);
        this.recording = false;
        this.flush();
        this.options.changed();
      },
      () => {
        this.pending = group.concat(this.pending);
        this.recording = false;
        this.options.changed();
      },
    );
  }

  /** After a cancellation: records what is left in one last group, and waits for it. */
  async recordRest(summary: string): Promise<void> {
    if (this.pending.length) await this.record(this.pending.splice(0), summary);
  }
}
