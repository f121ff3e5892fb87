// The readRows activity: a page of the batch's CSV, read on the worker (the batch's input holds only the path
// and sha256) and checked against the sha256 the batch started with.
import { loadCsv } from '../input/csv';
import type { PromptRow } from '../contract/types';
import { csvChanged } from './to-failure';

export interface ReadRowsInput {
  csvPath: string;
  csvSha256: string;
  offset: number;
  limit: number;
}

export function createRowActivities() {
  // The parsed CSV of the current batch; pages are cut from it instead of re-parsing per page.
  let csvCache: { key: string; rows: PromptRow[] } | undefined;

  return {
    async readRows({ csvPath, csvSha256, offset, limit }: ReadRowsInput): Promise<PromptRow[]> {
      const key = `${csvPath}\n${csvSha256}`;
      if (csvCache?.key !== key) {
        const parsed = await loadCsv(csvPath);
        if (parsed.sha256 !== csvSha256) {
          throw csvChanged(
            `${csvPath} changed since the batch started (sha256 ${parsed.sha256.slice(0, 12)}, expected ${csvSha256.slice(0, 12)}); restore it to continue`,
          );
        }
        csvCache = { key, rows: parsed.rows };
      }
      return csvCache.rows.slice(offset, offset + limit);
    },
  };
}
