// What earlier runs know about each row of a batch, from its output folder: the manifest's final state (last
// line wins) and the jobs journal (every job a submit made or may have made). readRows attaches it to each row,
// so a re-run skips rows that succeeded and checks known jobs before paying again. Folders are read
// incrementally: a batch of 100k rows re-reads only what was appended since the last page.
import { VIDEO_MISMATCH_CODE, type PromptResult } from '../contract/prompt';
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
}

/** Folds manifest records and journal entries into one prior outcome per row. */
export class PriorFold {
  private readonly rows = new Map<string, RowPrior>();

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
    if (typeof r.rowId !== 'string') return;
    const row = this.row(r.rowId);
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
  }

  /** A journal line: a job made (the highest generation's is the row's latest), or an unknown outcome. */
  entry(e: JournalEntry): void {
    if (typeof e.rowId !== 'string' || typeof e.generation !== 'number') return;
    const row = this.row(e.rowId);
    row.generation = Math.max(row.generation, e.generation);
    if (e.jobId && e.generation >= row.jobGeneration) {
      row.jobId = e.jobId;
      row.jobGeneration = e.generation;
    }
    if (e.unknown) row.journalUnknown += 1;
    if (e.unknown || e.jobId) row.posts += 1;
  }

  /**
   * What is known of a row; `withStatus` false leaves out its final state (another batch's folder: the batch
   * retry-failed retries). There, a row that ended `video_mismatch` offers no job: its job completed and its
   * video was judged wrong, so checking it would only fetch the same video; the retry pays for a new one, with
   * a key generation the gateway has not seen.
   */
  get(rowId: string, withStatus = true): PriorOutcome | undefined {
    const row = this.rows.get(rowId);
    if (!row) return undefined;
    const unknownSubmits = Math.max(row.manifestUnknown, row.journalUnknown);
    const regenerate = !withStatus && row.status === 'failed' && row.errorCode === VIDEO_MISMATCH_CODE;
    return {
      ...(withStatus && row.status ? { status: row.status } : {}),
      ...(withStatus && row.errorCode ? { errorCode: row.errorCode } : {}),
      ...(row.jobId && !regenerate ? { jobId: row.jobId, jobGeneration: row.jobGeneration } : {}),
      ...(withStatus && row.url ? { url: row.url } : {}),
      generation: regenerate ? Math.max(row.generation, row.jobGeneration + 1) : row.generation,
      ...(unknownSubmits ? { unknownSubmits } : {}),
      ...(row.posts ? { posts: row.posts } : {}),
    };
  }
}

/** One output folder's prior outcomes, kept up to date by reading only what its files gained. */
export class FolderPrior {
  private fold = new PriorFold();
  private manifest: JsonlTail<PromptResult>;
  private journal: JsonlTail<JournalEntry>;

  constructor(readonly dir: string) {
    this.manifest = new JsonlTail(manifestPath(dir));
    this.journal = new JsonlTail(journalPath(dir));
  }

  async refresh(): Promise<PriorFold> {
    const m = await this.manifest.read();
    const j = await this.journal.read();
    if (m.reset || j.reset) {
      // A file shrank (its torn tail was cut): fold both again from the start.
      this.fold = new PriorFold();
      this.manifest = new JsonlTail(manifestPath(this.dir));
      this.journal = new JsonlTail(journalPath(this.dir));
      return this.refresh();
    }
    for (const r of m.records) this.fold.record(r);
    for (const e of j.records) this.fold.entry(e);
    return this.fold;
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
