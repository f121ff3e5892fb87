// Reads what the gallery is made from (the input CSV, the manifest, the jobs journal) and turns it into the
// page's data. `review --serve` reads the manifest and journal again when they grow; the CSV, which does not
// change during a batch, is parsed again only when its size or mtime does (CsvPart).
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
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
  /** The batch's own folder (`<out root>/<batch id>`, or its URL in the store): manifest and journal. */
  outDir: string;
  /** The folder on this machine the page goes to, and its video links start from. */
  pageDir: string;
  manifestPath: string;
  /** The input CSV, when it can be read here (a batch id given for a batch run elsewhere may have none). */
  csvPath?: string;
  batch?: ReviewSources['batch'];
  /** The user's prices (`--price`, `--prices`): the ledger's cost and each card's. */
  prices?: Prices;
}

/** The input CSV's rows and cells, parsed again only when the file's size or mtime changed. */
export class CsvPart {
  private stamp = '';
  private value: Pick<ReviewSources, 'rows' | 'csv'> = { rows: [] };

  async read(path: string | undefined): Promise<Pick<ReviewSources, 'rows' | 'csv'>> {
    const file = path ? await stat(path).catch(() => undefined) : undefined;
    const stamp = file ? `${path}/${file.size}/${file.mtimeMs}` : '-';
    if (stamp === this.stamp) return this.value;
    this.value = { rows: [] };
    if (file) {
      const text = await readFile(path!);
      const parsed = parseCsv(text, path!);
      if (!parsed.problems.length) this.value = { rows: parsed.rows, csv: csvCells(text.toString('utf8')) };
    }
    this.stamp = stamp;
    return this.value;
  }
}

export async function loadSources(t: ReviewTarget, csvPart = new CsvPart()): Promise<ReviewSources> {
  return {
    batchId: t.batchId,
    ...(await csvPart.read(t.csvPath)),
    csvName: t.csvPath ? basename(t.csvPath) : undefined,
    manifest: await readManifest(t.manifestPath),
    journal: await readJournal(t.outDir),
    batch: t.batch,
  };
}

export async function reviewData(t: ReviewTarget, links: VideoLinks): Promise<ReviewData> {
  return reviewDataOf(await loadSources(t), t, links);
}

/** The page's data from sources already read. */
export async function reviewDataOf(
  sources: ReviewSources,
  t: ReviewTarget,
  links: VideoLinks,
): Promise<ReviewData> {
  return buildReviewData(sources, links, await reviewExtras(sources, t.outDir, t.prices), existsSync);
}
