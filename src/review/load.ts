// Reads what the gallery is made from (the input CSV, the manifest, the jobs journal) and turns it into the
// page's data. Read again on every refresh of `review --serve`: the files only grow while a batch runs.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { parseCsv } from '../input/csv';
import { readJournal } from '../results/jobs-journal';
import { readManifest } from '../results/manifest';
import { csvCells } from './csv-cells';
import { buildReviewData, type ReviewData, type ReviewSources, type VideoLinks } from './data';
import { reviewExtras } from './extras';
import type { Prices } from '../results/prices';

/** A batch to review: where its files are, and what Temporal says of it. */
export interface ReviewTarget {
  batchId: string;
  /** The batch's own folder (`<out root>/<batch id>`): manifest, journal, and the page. */
  outDir: string;
  manifestPath: string;
  /** The input CSV, when it can be read here (a batch id given for a batch run elsewhere may have none). */
  csvPath?: string;
  batch?: ReviewSources['batch'];
  /** The user's prices (`--price`, `--prices`): the ledger's cost and each card's. */
  prices?: Prices;
}

export async function loadSources(t: ReviewTarget): Promise<ReviewSources> {
  let rows: ReviewSources['rows'] = [];
  let csv: ReviewSources['csv'];
  if (t.csvPath && existsSync(t.csvPath)) {
    const text = await readFile(t.csvPath);
    const parsed = parseCsv(text, t.csvPath);
    if (!parsed.problems.length) {
      rows = parsed.rows;
      csv = csvCells(text.toString('utf8'));
    }
  }
  return {
    batchId: t.batchId,
    rows,
    csv,
    csvName: t.csvPath ? basename(t.csvPath) : undefined,
    manifest: await readManifest(t.manifestPath),
    journal: await readJournal(t.outDir),
    batch: t.batch,
  };
}

export async function reviewData(t: ReviewTarget, links: VideoLinks): Promise<ReviewData> {
  const sources = await loadSources(t);
  return buildReviewData(sources, links, await reviewExtras(sources, t.outDir, t.prices), existsSync);
}
