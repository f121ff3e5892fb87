// What a batch leaves on the worker's disk: downloadVideo (a finished video, verified) and recordResults (rows
// appended to the batch's manifest, each once however often the activity is retried).
import { resolve } from 'node:path';
import type { DownloadedVideo, PromptResult } from '../contract/types';
import { DownloadError } from '../errors';
import { downloadVerified } from '../results/download';
import { appendResults, manifestPath } from '../results/manifest';
import { downloadFailed } from './to-failure';

/** `outRoot`: the root under which each batch gets `<outRoot>/<batchId>/` unless it names its own folder. */
export function createOutputActivities(outRoot: string) {
  return {
    async downloadVideo({
      url,
      dir,
      name,
    }: {
      url: string;
      dir: string;
      name: string;
    }): Promise<DownloadedVideo> {
      try {
        const { file, sha256, bytes } = await downloadVerified(url, resolve(dir), name);
        return { file, sha256, bytes };
      } catch (err) {
        if (err instanceof DownloadError) throw downloadFailed(err);
        throw err;
      }
    },

    async recordResults({
      batchId,
      outDir,
      results,
    }: {
      batchId: string;
      outDir?: string;
      results: PromptResult[];
    }) {
      const dir = resolve(outDir ?? resolve(outRoot, batchId));
      const written = await appendResults(dir, results);
      return { manifestPath: manifestPath(dir), written };
    },
  };
}
