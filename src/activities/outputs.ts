// What a batch leaves on the worker's disk: downloadVideo (a finished video, verified) and recordResults (rows
// appended to the batch's manifest, each once however often the activity is retried).
import { basename, dirname, resolve } from 'node:path';
import { Context } from '@temporalio/activity';
import type { DownloadedVideo, PromptResult } from '../contract/types';
import { DownloadError } from '../errors';
import { downloadVerified } from '../results/download';
import { appendResults, manifestPath } from '../results/manifest';
import { allowedFile, allowedPath, type PathRoots } from './paths';
import { downloadFailed } from './to-failure';

/**
 * `outRoot`: the root under which each batch gets `<outRoot>/<batchId>/` unless it names its own folder.
 * `roots`: where manifests and videos may be written (activities/paths.ts); undefined: anywhere.
 */
export function createOutputActivities(outRoot: string, roots?: PathRoots) {
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
        const target = await allowedFile(dir, name, 'download', roots);
        // A stopping worker cancels its activities after the grace: a download stops there (and resumes
        // from its .part file on the next attempt) rather than keeping the worker up to its own timeout.
        const { file, sha256, bytes } = await downloadVerified(url, dirname(target), basename(target), {
          signal: Context.current().cancellationSignal,
        });
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
      const manifest = await allowedPath(manifestPath(outDir ?? resolve(outRoot, batchId)), 'out', roots);
      const dir = dirname(manifest);
      const written = await appendResults(dir, results);
      return { manifestPath: manifestPath(dir), written };
    },
  };
}
