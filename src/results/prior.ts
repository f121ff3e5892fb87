// What earlier runs know about each row of a batch, from its output folder: the manifest's final state (last
// line wins) and the jobs journal (every job a submit made or may have made). readRows attaches it to each row,
// so a re-run skips rows that succeeded and checks known jobs before paying again. Folders are read
// incrementally: a batch of 100k rows re-reads only what was appended since the last page.
import {
  isContentRefusal,
  JOB_GONE_CODE,
  NO_VIDEO_URL_CODE,
  replacesState,
  VIDEO_MISMATCH_CODE,
  type PromptResult,
} from '../contract/prompt';
import type { PriorOutcome } from '../contract/rows';
import { journalPath, type JournalEntry } from './jobs-journal';
import { JsonlTail } from './jsonl';
import { manifestPath } from './manifest';

interface RowPrior {
  status?: PromptResult['status'];
  errorCode?: string;
  url?: string;
  jobId?: string;
  /** Generation of `jobId`: the job of the highest generation is the row's latest. */
  jobGeneration: number;
  generation: number;
  /** Unknown outcomes as the manifest's final state counts them, and as the journal does. */
  manifestUnknown: number;
  journalUnknown: number;
  /** Journal lines: every POST that made (or may have made) a job. */
  posts: number;
  /** The job of the row's last journal line that had one. */
  journalJob?: string;
  /** The row's line in its CSV, when a record gave it. */
  line?: number;
  /** The final state is a late video's (`arrivedLate`): the ended line it superseded never comes back. */
  late?: PromptResult['arrivedLate'];
  /** A job an earlier run stopped at the provider (`jobStop: stopped`). */
  stoppedJob?: string;
}

/** What a folder's records are folded into: PriorFold, or the request index's (results/request-index.ts). */
export interface RecordFold {
  /** A manifest line. */
  record(r: PromptResult): void;
  /** A jobs journal line. */
  entry(e: JournalEntry): void;
}

/**
 * Folds manifest records and journal entries into one prior outcome per row: what a batch knows of its own
 * rows (and retry-failed of the original batch's). The output root's request index keeps its own, smaller
 * fold of other batches' rows (results/request-index.ts).
 */
export class PriorFold implements RecordFold {
  private readonly rows = new Map<string, RowPrior>();

  /** Rows on lines before this one are let go, and their later records ignored (FolderPrior.refresh). */
  floor = 0;

  /** Lets go of the rows before `line` (those whose line is known). */
  pass(line: number): void {
    if (line <= this.floor) return;
    this.floor = line;
    for (const [id, row] of this.rows) if (row.line !== undefined && row.line < line) this.rows.delete(id);
  }

  private passed(line: unknown): boolean {
    return typeof line === 'number' && line < this.floor;
  }

  private row(rowId: string): RowPrior {
    let row = this.rows.get(rowId);
    if (!row) {
      row = { jobGeneration: -1, generation: 0, manifestUnknown: 0, journalUnknown: 0, posts: 0 };
      this.rows.set(rowId, row);
    }
    return row;
  }

  /** A manifest line: the row's latest outcome (last line wins). */
  record(r: PromptResult): void {
    if (typeof r.rowId !== 'string' || this.passed(r.line)) return;
    const row = this.row(r.rowId);
    if (typeof r.line === 'number') row.line = r.line;
    if (!replacesState(row.late ? { arrivedLate: row.late } : undefined, r)) return;
    row.late = r.arrivedLate;
    const generation = r.generation ?? 0;
    row.status = r.status;
    row.errorCode = r.status === 'failed' ? r.errorCode : undefined;
    row.url = r.status === 'succeeded' ? r.url : undefined;
    row.generation = Math.max(row.generation, generation);
    if (r.jobId && generation >= row.jobGeneration) {
      row.jobId = r.jobId;
      row.jobGeneration = generation;
    }
    row.manifestUnknown = r.unknownSubmits ?? 0;
    row.stoppedJob = r.jobStop === 'stopped' ? r.jobId : undefined;
  }

  /** A journal line: a job made (the highest generation's is the row's latest), or an unknown outcome. */
  entry(e: JournalEntry): void {
    if (typeof e.rowId !== 'string' || typeof e.generation !== 'number' || this.passed(e.line)) return;
    const row = this.row(e.rowId);
    if (typeof e.line === 'number') row.line = e.line;
    row.generation = Math.max(row.generation, e.generation);
    // A job written twice (a retry that found it in its heartbeat writes it again) is one POST.
    const again = !!e.jobId && e.jobId === row.journalJob;
    if (e.jobId) row.journalJob = e.jobId;
    if (e.jobId && e.generation >= row.jobGeneration) {
      row.jobId = e.jobId;
      row.jobGeneration = e.generation;
    }
    if (e.unknown) row.journalUnknown += 1;
    // A job another row paid for (followedFrom) is followed, not posted.
    if (e.unknown || (e.jobId && !again && !e.followedFrom)) row.posts += 1;
  }

  /**
   * What is known of a row; `withStatus` false leaves out its final state (another batch's folder: the batch
   * retry-failed retries). There, a row whose job can give nothing more offers no job, and the retry pays for a
   * new one with a key generation the gateway has not seen: `video_mismatch` (checking it would fetch the same
   * wrong video), `no_video_url` (the same answer without a URL), `job_gone` (the gateway no longer knows it),
   * a content refusal (the job failed for the row's content).
   */
  get(rowId: string, withStatus = true): PriorOutcome | undefined {
    const row = this.rows.get(rowId);
    if (!row) return undefined;
    const unknownSubmits = Math.max(row.manifestUnknown, row.journalUnknown);
    const regenerate = !withStatus && row.status === 'failed' && regeneratedOnRetry(row.errorCode);
    return {
      ...(withStatus && row.status ? { status: row.status } : {}),
      ...(withStatus && row.errorCode ? { errorCode: row.errorCode } : {}),
      ...(row.jobId && !regenerate ? { jobId: row.jobId, jobGeneration: row.jobGeneration } : {}),
      ...(row.jobId && !regenerate && row.stoppedJob === row.jobId ? { jobStopped: true as const } : {}),
      ...(withStatus && row.url ? { url: row.url } : {}),
      generation: regenerate ? Math.max(row.generation, row.jobGeneration + 1) : row.generation,
      ...(unknownSubmits ? { unknownSubmits } : {}),
      ...(row.posts ? { posts: row.posts } : {}),
    };
  }
}

/** Codes whose job a retry never checks again: it would answer the same (PriorFold.get). */
function regeneratedOnRetry(code: string | undefined): boolean {
  return (
    code === VIDEO_MISMATCH_CODE ||
    code === NO_VIDEO_URL_CODE ||
    code === JOB_GONE_CODE ||
    isContentRefusal(code)
  );
}

/** How often a folder's reader reports that it is still reading (FolderTail.update's `progress`), in records. */
const PROGRESS_RECORDS = 2_000;

/**
 * One output folder's manifest and journal folded into `F`, kept up to date by reading only what the files
 * gained (the fold's records are folded as they are read: a big file's records are never all held at once).
 */
export class FolderTail<F extends RecordFold> {
  protected fold: F;
  private manifest: JsonlTail<PromptResult>;
  private journal: JsonlTail<JournalEntry>;
  /** The last refresh or update asked for, settled either way: the next one starts after it. */
  private last: Promise<unknown> = Promise.resolve();

  constructor(
    readonly dir: string,
    private readonly make: () => F,
  ) {
    this.fold = make();
    this.manifest = new JsonlTail(manifestPath(dir));
    this.journal = new JsonlTail(journalPath(dir));
  }

  /**
   * Reads what the files gained; `reset`: a file shrank and the fold was made again from the start.
   * `progress` is called every few thousand records while it reads (a long read heartbeats with it).
   */
  update(progress?: () => void): Promise<{ fold: F; reset: boolean }> {
    return this.serially(() => this.updateNow(progress));
  }

  /**
   * Runs `step` once the refresh or update before it has ended (failed or not). A folder is shared by
   * concurrent callers (a cache), and a step replaces the fold and the tails (a file shrank, or a refresh from
   * an earlier line) while another step may still be reading into them: its records would be folded twice.
   */
  protected serially<R>(step: () => Promise<R>): Promise<R> {
    const run = this.last.then(step);
    this.last = run.catch(() => undefined);
    return run;
  }

  protected restart(): void {
    this.fold = this.make();
    this.manifest = new JsonlTail(manifestPath(this.dir));
    this.journal = new JsonlTail(journalPath(this.dir));
  }

  protected async updateNow(progress?: () => void): Promise<{ fold: F; reset: boolean }> {
    let count = 0;
    const tick = () => {
      if (progress && ++count % PROGRESS_RECORDS === 0) progress();
    };
    const m = await this.manifest.read((r) => {
      this.fold.record(r);
      tick();
    });
    const j = await this.journal.read((e) => {
      this.fold.entry(e);
      tick();
    });
    if (m.reset || j.reset) {
      // A file shrank (its torn tail was cut): fold both again from the start.
      this.restart();
      return { ...(await this.updateNow(progress)), reset: true };
    }
    return { fold: this.fold, reset: false };
  }
}

/** One output folder's prior outcomes (PriorFold), kept up to date by reading only what its files gained. */
export class FolderPrior extends FolderTail<PriorFold> {
  constructor(dir: string) {
    super(dir, () => new PriorFold());
  }

  /**
   * The folder's prior outcomes, brought up to date. `fromLine`: the asker reads rows from this CSV line on
   * and never again those before it (a batch reads its pages once, in order), so they are let go: a batch's
   * own folder is then held for the rows ahead of its cursor only. Asked for an earlier line (a new run of
   * the batch starts over), it reads the folder again from the start.
   */
  refresh(fromLine?: number): Promise<PriorFold> {
    return this.serially(async () => {
      if (fromLine !== undefined && fromLine < this.fold.floor) this.restart();
      const { fold } = await this.updateNow();
      if (fromLine !== undefined) fold.pass(fromLine);
      return fold;
    });
  }
}

/**
 * A row's prior outcome from its batch's own folder and, for retry-failed, the original batch's folder: the
 * final state comes from the own folder only (the retry records every row it takes); jobs and unknown
 * outcomes from both, the own folder's job winning.
 */
export function mergePrior(own?: PriorOutcome, original?: PriorOutcome): PriorOutcome | undefined {
  if (!original) return own;
  if (!own) return original;
  return {
    ...original,
    ...own,
    ...(own.jobId
      ? { jobId: own.jobId, jobGeneration: own.jobGeneration }
      : original.jobId
        ? { jobId: original.jobId, jobGeneration: original.jobGeneration }
        : {}),
    generation: Math.max(own.generation, original.generation),
    // The spend cap is the batch's own: the original batch's POSTs are not this one's.
    posts: own.posts,
    ...(own.unknownSubmits || original.unknownSubmits
      ? { unknownSubmits: Math.max(own.unknownSubmits ?? 0, original.unknownSubmits ?? 0) }
      : {}),
  };
}
