// The readRows activity: a page of the batch's CSV, read on the worker (the batch's input holds only the path
// and sha256) and checked against the sha256 the batch started with. With the batch's output folder (batches
// started after the `spend-safety` patch) each row carries what earlier runs know about it (`prior`), and a
// page is cut by size as well as by count so that no payload comes near Temporal's limit.
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { loadCsv } from '../input/csv';
import type { PageRow, PriorOutcome, PromptRow } from '../contract/rows';
import { FolderPrior, mergePrior } from '../results/prior';
import { allowedPath, type PathRoots } from './paths';
import { csvChanged } from './to-failure';

export interface ReadRowsInput {
  csvPath: string;
  csvSha256: string;
  offset: number;
  limit: number;
  /** The batch: with it, rows carry `prior` from its output folder and pages are cut at `maxBytes`. */
  batchId?: string;
  /** The batch's output folder; default `<outRoot>/<batchId>`. */
  outDir?: string;
  /** retry-failed: the original batch's folder, for the jobs it made for the same rows. */
  priorOutDir?: string;
  /** Most bytes of rows JSON per page (at least one row is returned). */
  maxBytes?: number;
}

/** A prior outcome worth sending: the row finished, has a job, or had a submit of unknown outcome. */
function meaningful(prior: PriorOutcome | undefined): prior is PriorOutcome {
  return !!prior && (!!prior.status || !!prior.jobId || !!prior.unknownSubmits || prior.generation > 0);
}

/** Cuts `rows` after the last one that keeps the page's JSON within `maxBytes` (at least one row). */
export function cutBySize<T>(rows: T[], maxBytes: number): T[] {
  let bytes = 2; // []
  for (let i = 0; i < rows.length; i++) {
    bytes += Buffer.byteLength(JSON.stringify(rows[i])) + 1;
    if (bytes > maxBytes && i > 0) return rows.slice(0, i);
  }
  return rows;
}

/** `roots`: where CSVs may be read and output folders consulted (activities/paths.ts); undefined: anywhere. */
export function createRowActivities(outRoot = 'out', roots?: PathRoots) {
  // The parsed CSV of the current batch; pages are cut from it instead of re-parsing per page. A file whose
  // size or mtime moved is read and checked again, so an edit is noticed on the next page.
  let csvCache: { key: string; rows: PromptRow[] } | undefined;
  // Output folders read so far (a few batches at a time per worker), each read incrementally.
  const folders = new Map<string, FolderPrior>();
  const folder = (dir: string) => {
    let f = folders.get(dir);
    if (!f) {
      if (folders.size >= 16) folders.delete(folders.keys().next().value!);
      folders.set(dir, (f = new FolderPrior(dir)));
    }
    return f;
  };

  return {
    async readRows(input: ReadRowsInput): Promise<PageRow[]> {
      const { csvSha256, offset, limit } = input;
      const csvPath = await allowedPath(input.csvPath, 'input', roots);
      const file = await stat(csvPath).catch(() => undefined);
      const key = `${csvPath}\n${csvSha256}\n${file?.size}\n${file?.mtimeMs}`;
      if (csvCache?.key !== key) {
        if (!file)
          throw csvChanged(
            `${csvPath} is missing (the batch started from it): restore it and resume, or cancel the batch`,
          );
        const parsed = await loadCsv(csvPath);
        if (parsed.sha256 !== csvSha256) {
          throw csvChanged(
            `${csvPath} changed since the batch started: restore it and resume, or cancel the batch (sha256 now ${parsed.sha256.slice(0, 12)}, expected ${csvSha256.slice(0, 12)})`,
          );
        }
        csvCache = { key, rows: parsed.rows };
      }
      const rows = csvCache.rows.slice(offset, offset + limit);
      if (!input.batchId) return rows; // batches started before the spend-safety patch
      const ownDir = await allowedPath(input.outDir ?? resolve(outRoot, input.batchId), 'out', roots);
      const own = await folder(ownDir).refresh();
      const original = input.priorOutDir
        ? await folder(await allowedPath(input.priorOutDir, 'out', roots)).refresh()
        : undefined;
      const page: PageRow[] = rows.map((row) => {
        const prior = mergePrior(own.get(row.id), original?.get(row.id, false));
        return meaningful(prior) ? { ...row, prior } : row;
      });
      return input.maxBytes ? cutBySize(page, input.maxBytes) : page;
    },
  };
}
