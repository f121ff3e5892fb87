// Reads what the gallery is made from (the input CSV, the manifest, the jobs journal) and turns it into the
// page's data. `review --serve` reads the manifest and journal again when they grow; the CSV, which does not
// change during a batch, is parsed again only when its size or mtime does (CsvPart).
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import type { ProviderAdapter } from '../gateway/provider';
import { parseCsv } from '../input/csv';
import { readJournal } from '../results/jobs-journal';
import { readManifest } from '../results/manifest';
import { csvCells } from './csv-cells';
import { objectAt } from '../store/open-store';
import { isStoreUrl } from '../store/store-url';
import { buildReviewData, localFileOf, type ReviewData, type ReviewSources, type VideoLinks } from './data';
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
  /**
   * The provider the CSV was read for (GATEWAY_PROVIDER, as `run` read it): its defaults fill the rows, and a
   * value only it takes is no problem. Absent: the Model Gateway.
   */
  provider?: ProviderAdapter;
}

/** The input CSV's rows and cells, parsed again only when the file's size or mtime changed. */
export class CsvPart {
  private stamp = '';
  private value: Pick<ReviewSources, 'rows' | 'csv'> = { rows: [] };

  async read(
    path: string | undefined,
    provider?: ProviderAdapter,
  ): Promise<Pick<ReviewSources, 'rows' | 'csv'>> {
    const file = path ? await stat(path).catch(() => undefined) : undefined;
    const stamp = file ? `${path}/${file.size}/${file.mtimeMs}` : '-';
    if (stamp === this.stamp) return this.value;
    this.value = { rows: [] };
    if (file) {
      const text = await readFile(path!);
      const parsed = parseCsv(text, path!, provider ? { provider } : {});
      if (!parsed.problems.length) this.value = { rows: parsed.rows, csv: csvCells(text.toString('utf8')) };
    }
    this.stamp = stamp;
    return this.value;
  }
}

export async function loadSources(t: ReviewTarget, csvPart = new CsvPart()): Promise<ReviewSources> {
  return {
    batchId: t.batchId,
    ...(await csvPart.read(t.csvPath, t.provider)),
    csvName: t.csvPath ? basename(t.csvPath) : undefined,
    manifest: await readManifest(t.manifestPath),
    journal: await readJournal(t.outDir),
    batch: t.batch,
  };
}

export async function reviewData(t: ReviewTarget, links: VideoLinks): Promise<ReviewData> {
  return reviewDataOf(await loadSources(t), t, links);
}

/** How long a written page's links into the store work: the longest S3 allows (SigV4: 7 days). */
export const STORE_LINK_SECONDS = 7 * 24 * 3600;

/**
 * Links into the store for the videos kept there that are not downloaded beside the page. They carry a
 * signature, not the store's credentials, and let whoever has the page play those videos until they expire.
 */
async function storeLinks(sources: ReviewSources, pageDir: string): Promise<VideoLinks['storeLinks']> {
  const hrefs = new Map<string, string>();
  const stored = sources.manifest.filter(
    (r) => r.status === 'succeeded' && r.file && isStoreUrl(r.file) && !existsSync(localFileOf(r, pageDir)!),
  );
  if (!stored.length) return undefined;
  const until = new Date(Date.now() + STORE_LINK_SECONDS * 1000).toISOString();
  for (const r of stored) {
    const { store, key } = await objectAt(r.file!);
    if (!store.presign) continue;
    hrefs.set(r.file!, await store.presign(key, STORE_LINK_SECONDS));
  }
  return { hrefs, until };
}

/** The page's data from sources already read. */
export async function reviewDataOf(
  sources: ReviewSources,
  t: ReviewTarget,
  links: VideoLinks,
): Promise<ReviewData> {
  const stored = links.serverUrl ? undefined : await storeLinks(sources, links.pageDir);
  return buildReviewData(
    sources,
    stored ? { ...links, storeLinks: stored } : links,
    await reviewExtras(sources, t.outDir, t.prices),
    existsSync,
  );
}
