// What a batch leaves on the worker's disk: downloadVideo (a finished video, verified, then checked against its
// row's request) and recordResults (rows appended to the batch's manifest, each once however often the activity
// is retried).
import { basename, dirname, resolve } from 'node:path';
import { Context } from '@temporalio/activity';
import type { VerifiedVideo, VideoTarget } from '../contract/jobs';
import type { PromptResult } from '../contract/prompt';
import { DownloadError } from '../errors';
import { downloadVerified } from '../results/download';
import { appendResults, manifestPath } from '../results/manifest';
import { askedOf, verifyVideo } from '../results/verify-video';
import { isStoreUrl } from '../store/store-url';
import { allowedFile, allowedPath, type PathRoots } from './paths';
import { downloadFailed } from './to-failure';

/** How often a running download heartbeats (well inside the 30 s heartbeat timeout the prompt workflow gives it). */
const DOWNLOAD_HEARTBEAT_MS = 5_000;

/**
 * Fetches a finished video into its target, verified, then checks it against its row's request. Throws an
 * ApplicationFailure (UrlExpired, DownloadFailed) when the download fails; `signal` stops it (a .part file
 * stays for the next attempt to resume).
 */
export async function fetchVideo(
  url: string,
  { dir, batchId, outDir, name, parameters, maxBytes }: VideoTarget,
  outRoot: string,
  roots: PathRoots | undefined,
  signal: AbortSignal,
): Promise<VerifiedVideo> {
  try {
    // Without `dir` the video goes where the batch's manifest goes, so the out roots allow it.
    if (dir === undefined && outDir === undefined && !batchId)
      throw new Error('downloadVideo needs a folder: dir, outDir or batchId');
    const target =
      dir !== undefined
        ? await allowedFile(dir, name, 'download', roots)
        : await allowedFile(
            // A batch whose results are in the store keeps its videos in this worker's out root.
            outDir !== undefined && !isStoreUrl(outDir) ? outDir : resolve(outRoot, batchId!),
            name,
            'out',
            roots,
          );
    const { file, sha256, bytes } = await downloadVerified(url, dirname(target), basename(target), {
      signal,
      ...(maxBytes !== undefined ? { maxBytes } : {}),
    });
    // A mismatch is reported, never thrown: retrying cannot change what the gateway made.
    return { file, sha256, bytes, verification: await verifyVideo(file, askedOf(parameters)) };
  } catch (err) {
    if (err instanceof DownloadError) throw downloadFailed(err);
    throw err;
  }
}

/**
 * `outRoot`: the root under which each batch gets `<outRoot>/<batchId>/` unless it names its own folder.
 * `roots`: where manifests and videos may be written (activities/paths.ts); undefined: anywhere.
 */
export function createOutputActivities(outRoot: string, roots?: PathRoots) {
  return {
    async downloadVideo({ url, ...target }: VideoTarget & { url: string }): Promise<VerifiedVideo> {
      // Alive while it runs: a worker that dies mid-download is noticed within the heartbeat timeout, and the
      // download goes on elsewhere, instead of holding its row for the whole start-to-close timeout.
      const ctx = Context.current();
      const beat = setInterval(() => ctx.heartbeat(), DOWNLOAD_HEARTBEAT_MS);
      try {
        // A stopping worker cancels its activities after the grace: a download stops there (and resumes
        // from its .part file on the next attempt) rather than keeping the worker up to its own timeout.
        return await fetchVideo(url, target, outRoot, roots, ctx.cancellationSignal);
      } finally {
        clearInterval(beat);
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
