// Writes a batch's report page: for `vidbatch report`, and for a notice when a batch ends (so the notice can
// say where the page is).
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import type { Prices } from '../results/prices';
import { REVIEW_FILE } from '../review/page';
import { buildReport, readReportSources } from './report-data';
import { reportPage } from './report-page';
import type { ReportData } from './report-types';

/** The page's file name in a batch folder. */
export const REPORT_FILE = 'report.html';

export interface WriteReport {
  batchId: string;
  /** The batch's folder (or its URL in the store): what the page is made from. */
  folder: string;
  /** The local folder the page and the gallery go to. */
  pageDir: string;
  /** Where the page goes; default `report.html` in `pageDir`. */
  file?: string;
  prices?: Prices;
  /** Flags every printed command needs besides the batch (`--out-root <dir>` when it is not the default). */
  commandFlags?: string;
}

export async function writeReport(o: WriteReport): Promise<{ data: ReportData; file: string }> {
  const file = resolve(o.file ?? join(o.pageDir, REPORT_FILE));
  const gallery = join(o.pageDir, REVIEW_FILE);
  // Relative, so the pair of pages can be moved or copied together.
  const href = relative(dirname(file), gallery).split(sep).map(encodeURIComponent).join('/');
  const data = buildReport(await readReportSources(o.batchId, o.folder), {
    gallery: {
      href,
      exists: existsSync(gallery),
      command: `vidbatch review ${o.batchId}${o.commandFlags ?? ''}`,
    },
    ...(o.prices ? { prices: o.prices } : {}),
    commandFlags: o.commandFlags ?? '',
  });
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, reportPage(data));
  return { data, file };
}
