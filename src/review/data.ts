// What the review gallery shows, as plain data embedded in the page (and served as JSON by `review --serve`):
// one row per CSV row, with its final state from the manifest (last line wins) or, for rows not finished yet,
// what the jobs journal knows. Pure: reading the files is in load.ts.
import { join, relative, sep } from 'node:path';
import type { Verification } from '../contract/jobs';
import type { PromptResult, ReusedFrom } from '../contract/prompt';
import type { PromptRow } from '../contract/rows';
import type { JournalEntry } from '../results/jobs-journal';
import { inputRows } from '../results/export';
import type { CsvCells } from './csv-cells';
import { isStoreUrl } from '../store/store-url';

/** A row's state: finished (manifest), or not yet: a job was made (journal), or none yet. */
export type ReviewState = 'succeeded' | 'failed' | 'submitted' | 'waiting';

/** A downloaded video checked against the request; shown when the manifest has it. */
export type RowVerification = Verification;

export interface ReviewRow {
  id: string;
  line: number;
  /** The prompt sent (a rewrite's, once the row was rewritten). */
  prompt: string;
  /** The prompt as the user wrote it, when `prompt` is its rewrite: the gallery shows both side by side. */
  originalPrompt?: string;
  model: string;
  resolution?: string;
  duration?: number;
  state: ReviewState;
  errorCode?: string;
  errorMessage?: string;
  jobId?: string;
  attempts?: number;
  polls?: number;
  /** Submits with an unknown outcome: each may have made a billed job. */
  unknownSubmits?: number;
  /** The same request was paid for by another batch of the output root: its batch and row. */
  reusedFrom?: ReusedFrom;
  submittedAt?: string;
  finishedAt?: string;
  /**
   * `local`: vidbatch's copy (the downloaded file as a path relative to the page, the server's URL, or a link
   * into the store valid `until`); else the provider URL.
   */
  video?: { src: string; local: boolean; until?: string };
  downloadError?: string;
  verification?: RowVerification;
  estimatedCost?: number;
  /** The row as the input CSV has it, in `ReviewData.header` order: what the exports write. */
  cells: string[];
}

export interface ReviewData {
  batchId: string;
  /** The input CSV's file name. */
  csvName?: string;
  /** Temporal's status of the batch when the page was made (RUNNING, COMPLETED...), when known. */
  workflowStatus?: string;
  startedAt?: string;
  closedAt?: string;
  generatedAt: string;
  /** The spend ledger's line ("jobs made: N for M rows ..."), when known. */
  ledger?: string;
  /** Estimated spend of the batch, when prices are known. */
  spend?: number;
  /** The export columns: the input CSV's header (with `id` first when it had none). */
  header: string[];
  rows: ReviewRow[];
}

/** What the page is made from. */
export interface ReviewSources {
  batchId: string;
  /** The rows of the input CSV (empty when the CSV could not be read: the manifest's rows are shown). */
  rows: PromptRow[];
  csv?: CsvCells;
  csvName?: string;
  manifest: PromptResult[];
  journal: JournalEntry[];
  batch?: { workflowStatus: string; startTime: Date; closeTime?: Date };
}

/** What other modules add (ledger, prices): see extras.ts, the one place they are wired in. */
export interface ReviewExtras {
  ledger?: string;
  /** The batch's estimated spend; defaults to the sum of the rows' estimated costs. */
  spend?: number;
  estimateCost?: (row: PromptResult) => number | undefined;
}

export interface VideoLinks {
  /** The page's folder: downloaded files are linked relative to it (file://). */
  pageDir: string;
  /** `review --serve`: the server's URL of a row's file instead (it serves the store's copies too). */
  serverUrl?: (rowId: string) => string;
  /** A written page: links into the store for videos kept there and not downloaded here, by `s3://` URL. */
  storeLinks?: { hrefs: Map<string, string>; until: string };
}

/** A relative file path as a URL path (each segment encoded: names may hold `#`, `?` or spaces). */
export function fileHref(pageDir: string, file: string): string {
  return relative(pageDir, file).split(sep).map(encodeURIComponent).join('/');
}

/**
 * The file on this machine a row's video is in: the one it names, or for a video kept in the store, the copy
 * `vidbatch download` puts beside the page.
 */
export function localFileOf(r: Pick<PromptResult, 'file'>, pageDir: string): string | undefined {
  if (!r.file) return undefined;
  return isStoreUrl(r.file) ? join(pageDir, r.file.slice(r.file.lastIndexOf('/') + 1)) : r.file;
}

function videoOf(r: PromptResult, links: VideoLinks, fileExists: (f: string) => boolean): ReviewRow['video'] {
  const file = localFileOf(r, links.pageDir);
  if (file && fileExists(file))
    return { src: links.serverUrl ? links.serverUrl(r.rowId) : fileHref(links.pageDir, file), local: true };
  if (r.file && isStoreUrl(r.file)) {
    if (links.serverUrl) return { src: links.serverUrl(r.rowId), local: true };
    const href = links.storeLinks?.hrefs.get(r.file);
    if (href) return { src: href, local: true, until: links.storeLinks!.until };
  }
  return r.url ? { src: r.url, local: false } : undefined;
}

export function buildReviewData(
  src: ReviewSources,
  links: VideoLinks,
  extras: ReviewExtras = {},
  fileExists: (f: string) => boolean = () => true,
): ReviewData {
  const finished = new Map(src.manifest.map((r) => [r.rowId, r]));
  const jobs = new Map<string, JournalEntry>();
  for (const entry of src.journal) if (entry.jobId) jobs.set(entry.rowId, entry);
  const unknown = new Map<string, number>();
  for (const entry of src.journal)
    if (entry.unknown) unknown.set(entry.rowId, (unknown.get(entry.rowId) ?? 0) + 1);

  // Without the CSV, the manifest's rows are the rows, written back as input rows (results/export.ts).
  let header = src.csv?.header;
  let cells = src.csv?.cells;
  let rows = src.rows;
  if (!src.csv || !rows.length) {
    const table = inputRows(src.manifest);
    header = table[0]!;
    cells = new Map(table.slice(1).map((r) => [r[0]!, r]));
    rows = src.manifest.map((r) => ({ ...r, id: r.rowId }));
  }

  const out: ReviewRow[] = rows.map((row) => {
    const r = finished.get(row.id);
    // A row rewritten in the batch has its CSV prompt as the original and the rewrite on its result.
    const originalPrompt = r?.originalPrompt ?? row.originalPrompt;
    const base: ReviewRow = {
      id: row.id,
      line: row.line,
      prompt: r?.prompt ?? row.prompt,
      ...(originalPrompt !== undefined ? { originalPrompt } : {}),
      model: row.model,
      resolution: stringOr(row.parameters?.resolution),
      duration: numberOr(row.parameters?.duration),
      state: r ? r.status : jobs.has(row.id) ? 'submitted' : 'waiting',
      cells: cells?.get(row.id) ?? [],
    };
    if (!r) {
      const job = jobs.get(row.id);
      return {
        ...base,
        jobId: job?.jobId,
        submittedAt: job?.at,
        unknownSubmits: unknown.get(row.id),
      };
    }
    const verification = (r as PromptResult & { verification?: RowVerification }).verification;
    return {
      ...base,
      errorCode: r.errorCode,
      errorMessage: r.errorMessage,
      jobId: r.jobId,
      attempts: r.attempts,
      polls: r.polls,
      unknownSubmits: r.unknownSubmits,
      submittedAt: r.submittedAt,
      finishedAt: r.finishedAt,
      video: videoOf(r, links, fileExists),
      downloadError: r.downloadError,
      verification,
      // A reused row cost this batch nothing: the batch that paid counts it.
      ...(r.reusedFrom ? { reusedFrom: r.reusedFrom } : { estimatedCost: extras.estimateCost?.(r) }),
    };
  });
  const costs = out.map((r) => r.estimatedCost).filter((c): c is number => typeof c === 'number');
  return {
    batchId: src.batchId,
    csvName: src.csvName,
    workflowStatus: src.batch?.workflowStatus,
    startedAt: src.batch?.startTime.toISOString(),
    closedAt: src.batch?.closeTime?.toISOString(),
    generatedAt: new Date().toISOString(),
    ledger: extras.ledger,
    spend: extras.spend ?? (costs.length ? costs.reduce((a, b) => a + b, 0) : undefined),
    header: header ?? [],
    rows: out,
  };
}

const stringOr = (v: unknown) => (typeof v === 'string' ? v : undefined);
const numberOr = (v: unknown) => (typeof v === 'number' ? v : undefined);
