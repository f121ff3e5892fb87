// What a batch leaves on the worker's disk, or in the shared store: downloadVideo (a finished video, verified,
// then checked against its row's request) and recordResults (rows appended to the batch's manifest, each once
// however often the activity is retried; in the store, the batch's logs compacted now and then).
import { createReadStream } from 'node:fs';
import { readdir, rm, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { Context } from '@temporalio/activity';
import type { Logger } from '@temporalio/common';
import type { VerifiedVideo, VideoTarget } from '../contract/jobs';
import type { PromptResult } from '../contract/prompt';
import { DownloadError } from '../errors';
import { downloadVerified, type KeyedAccess } from '../results/download';
import { journalPath } from '../results/jobs-journal';
import { appendResults, manifestPath } from '../results/manifest';
import { logAt } from '../store/object-log';
import { askedOf, verifyVideo } from '../results/verify-video';
import { objectAt } from '../store/open-store';
import { isStoreUrl } from '../store/store-url';
import { allowedFile, allowedPath, type PathRoots } from './paths';
import { downloadFailed } from './to-failure';

/** Where a worker fetches the videos of a batch whose results are in the store, before putting them there. */
export const STAGING_DIR = '.staging';

/** How often a running download heartbeats (well inside the 30 s heartbeat timeout the prompt workflow gives it). */
const DOWNLOAD_HEARTBEAT_MS = 5_000;

/**
 * Fetches a finished video into its target, verified, then checks it against its row's request. Throws an
 * ApplicationFailure (UrlExpired, DownloadFailed) when the download fails; `signal` stops it (a .part file
 * stays for the next attempt to resume). `auth`: the key's headers for a provider that serves its videos
 * itself, from this worker's settings (never from the workflow: the key stays out of history).
 */
export async function fetchVideo(
  url: string,
  { dir, batchId, outDir, name, parameters, maxBytes }: VideoTarget,
  outRoot: string,
  roots: PathRoots | undefined,
  signal: AbortSignal,
  auth?: KeyedAccess,
): Promise<VerifiedVideo> {
  try {
    // Without `dir` the video goes where the batch's manifest goes, so the out roots allow it.
    if (dir === undefined && outDir === undefined && !batchId)
      throw new Error('downloadVideo needs a folder: dir, outDir or batchId');
    // A batch whose results are in the store keeps its videos there: fetched into this worker's out root
    // first (where a cut download resumes), then put beside its results, and the local copy let go.
    const stored = dir === undefined && outDir !== undefined && isStoreUrl(outDir);
    const target =
      dir !== undefined
        ? await allowedFile(dir, name, 'download', roots)
        : await allowedFile(
            stored ? resolve(outRoot, STAGING_DIR, batchId!) : (outDir ?? resolve(outRoot, batchId!)),
            name,
            'out',
            roots,
          );
    const { file, sha256, bytes } = await downloadVerified(url, dirname(target), basename(target), {
      signal,
      ...(maxBytes !== undefined ? { maxBytes } : {}),
      ...(auth ? { auth } : {}),
    });
    // A mismatch is reported, never thrown: retrying cannot change what the gateway made.
    const verification = await verifyVideo(file, askedOf(parameters));
    if (!stored) return { file, sha256, bytes, verification };
    const inStore = await allowedFile(outDir, name, 'out', roots);
    const { store, key } = await objectAt(inStore);
    try {
      await store.upload(key, createReadStream(file), { contentType: 'video/mp4', metadata: { sha256 } });
    } finally {
      // Uploaded or not, the copy goes: the retry of a failed upload may run on another worker, which fetches
      // the video again, and nothing of the batch stays here.
      await rm(file, { force: true });
    }
    return { file: inStore, sha256, bytes, verification };
  } catch (err) {
    if (err instanceof DownloadError) throw downloadFailed(err);
    throw err;
  }
}

/** How often a worker looks for parts to compact in a batch's logs in the store, and how many make it worth it. */
const COMPACT_EVERY_MS = 60_000;
const COMPACT_MIN_PARTS = 256;
const compactedAt = new Map<string, number>();

/**
 * Compacts the batch's results and jobs journal in the store (store/object-log.ts), at most once a minute per
 * batch and worker, in the background: recording never waits for it, and a compaction cut short (the worker
 * stopped) leaves objects every reader still reads once.
 */
function compactLogs(dir: string, log: Logger): void {
  const now = Date.now();
  if (now - (compactedAt.get(dir) ?? 0) < COMPACT_EVERY_MS) return;
  compactedAt.set(dir, now);
  for (const [name, at] of compactedAt) if (now - at > 10 * COMPACT_EVERY_MS) compactedAt.delete(name);
  void (async () => {
    for (const path of [manifestPath(dir), journalPath(dir)]) {
      try {
        const merged = await (await logAt(path)).compact(Date.now(), COMPACT_MIN_PARTS);
        if (merged) log.info('compacted a log in the store', { path, merged });
      } catch (err) {
        log.warn('could not compact a log in the store; its objects stay as they are', {
          path,
          error: err instanceof Error ? err.message : String(err),
        });
      }
    }
  })();
}

/**
 * Deletes what a worker killed mid-download or mid-upload left in the staging folder (written before
 * `before`, when this worker started: its own downloads are newer). Their retries fetch the video again.
 */
async function clearStaging(dir: string, before: number): Promise<void> {
  const files = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const f of files.filter((e) => e.isFile())) {
    const path = join(f.parentPath, f.name);
    const file = await stat(path).catch(() => undefined);
    if (file && file.mtimeMs < before) await rm(path, { force: true });
  }
}

/**
 * `outRoot`: the root under which each batch gets `<outRoot>/<batchId>/` unless it names its own folder.
 * `roots`: where manifests and videos may be written (activities/paths.ts); undefined: anywhere.
 * `videoAuth`: what fetching the provider's own video URLs needs (GatewayClient.videoAuth), asked per download.
 */
export function createOutputActivities(
  outRoot: string,
  roots?: PathRoots,
  videoAuth?: () => KeyedAccess | undefined,
) {
  void clearStaging(resolve(outRoot, STAGING_DIR), Date.now());
  return {
    async downloadVideo({ url, ...target }: VideoTarget & { url: string }): Promise<VerifiedVideo> {
      // Alive while it runs: a worker that dies mid-download is noticed within the heartbeat timeout, and the
      // download goes on elsewhere, instead of holding its row for the whole start-to-close timeout.
      const ctx = Context.current();
      const beat = setInterval(() => ctx.heartbeat(), DOWNLOAD_HEARTBEAT_MS);
      try {
        // A stopping worker cancels its activities after the grace: a download stops there (and resumes
        // from its .part file on the next attempt) rather than keeping the worker up to its own timeout.
        return await fetchVideo(url, target, outRoot, roots, ctx.cancellationSignal, videoAuth?.());
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
      if (isStoreUrl(dir)) compactLogs(dir, Context.current().log);
      return { manifestPath: manifestPath(dir), written };
    },
  };
}
