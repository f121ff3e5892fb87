// The output root's request index: which requests (input/request-key.ts) its batches already paid for. A new
// batch in the root consults it before paying: a request another batch kept a video for is recorded from that
// job at no cost, a job another batch made and may still finish is followed instead of paying again, and
// unknown submit outcomes count against the row's resend bound. Nothing is stored besides the batches' own
// manifests and jobs journals, which are read incrementally (a batch of 100k rows re-reads only what was
// appended since the last page). The root may be the shared store (VIDBATCH_STORE): its batch folders are
// read the same way, as object logs. What it keeps of each folder is a RequestFold (request-fold.ts).
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { objectAt } from '../store/open-store';
import { isStoreUrl, joinStorePath } from '../store/store-url';
import { type PromptResult } from '../contract/prompt';
import { rowFields, type PriorOutcome, type PromptRow } from '../contract/rows';
import { scopeOfBatch } from '../contract/target';
import { FolderTail } from './prior';
import {
  FOLLOW_CODES,
  Interned,
  RequestFold,
  settledCode,
  Spill,
  type KeptVideo,
  type RequestSource,
  type Reuse,
} from './request-fold';

export { FOLLOW_CODES } from './request-fold';
export type { KeptVideo, RequestSource, Reuse, RowView } from './request-fold';

/** A batch folder of the root, read into its fold. */
interface Folder {
  reader: FolderTail<RequestFold>;
  /** Set once the folder was read (a lookup skips a folder before that). */
  fold?: RequestFold;
}

/** A row a lookup found for a request, in a folder's fold. */
interface Found {
  batchId: string;
  fold: RequestFold;
  slot: number;
  jobId: string;
  kept?: KeptVideo;
}

/** The folders directly under a store URL (one listing, however many objects they hold). */
async function storeFolders(url: string): Promise<string[]> {
  const { store, key } = await objectAt(url);
  const names: string[] = [];
  for await (const name of store.folders(key ? `${key}/` : '')) names.push(name);
  return names;
}

export class RequestIndex {
  private readonly folders = new Map<string, Folder>();
  private readonly spill: Spill;
  private readonly codes = new Interned();
  /** Batch folders of the asker's scope the last refresh listed. */
  private listed = 0;

  /** `spillDir`: where the kept videos' spill file goes (default the system's temporary folder). */
  constructor(
    readonly root: string,
    options: { spillDir?: string } = {},
  ) {
    this.spill = new Spill(options.spillDir ?? tmpdir());
  }

  /**
   * Reads what the root's batch folders of `except`'s scope gained since the last refresh (new folders
   * included). `except`, the asking batch's own folder, is never read: its rows are its own prior, folded
   * elsewhere. A batch of another target (another gateway account, or `--simulate`) is never read: its jobs
   * were not made where this batch pays, so nothing of it is reused or followed. `progress` is called every
   * few thousand records and after each folder (a long first read heartbeats with it).
   */
  async refresh(except: string, progress?: () => void): Promise<this> {
    const scope = scopeOfBatch(except);
    const store = isStoreUrl(this.root);
    const names = store
      ? await storeFolders(this.root)
      : await readdir(this.root).catch(() => [] as string[]);
    const mine = names.filter((n) => n !== except && scope && scopeOfBatch(n) === scope);
    this.listed = mine.length;
    for (const name of mine) {
      let folder = this.folders.get(name);
      if (!folder) {
        const dir = store ? joinStorePath(this.root, name) : join(this.root, name);
        folder = { reader: new FolderTail(dir, () => new RequestFold(this.spill, this.codes)) };
        this.folders.set(name, folder);
      }
      folder.fold = (await folder.reader.update(progress)).fold;
      folder.fold.trim();
      progress?.();
    }
    return this;
  }

  /** How far reading has come, for a message: "4 of 10 batch folders read". */
  get reading(): string {
    let read = 0;
    for (const folder of this.folders.values()) if (folder.fold) read += 1;
    return `${Math.min(read, this.listed)} of ${this.listed} batch folders read`;
  }

  /** What other batches than `except` know of `request` (undefined: nothing, or the index was closed). */
  lookup(request: string, except: string): Reuse | undefined {
    if (this.spill.closed) return undefined;
    let kept: Found | undefined;
    let follow: Found | undefined;
    let settled: Found | undefined;
    let unknownSubmits = 0;
    const scope = scopeOfBatch(except);
    for (const [batchId, folder] of this.folders) {
      const fold = folder.fold;
      // Only batches of the asker's target and root: one index serves every batch of the root.
      if (batchId === except || !fold || !scope || scopeOfBatch(batchId) !== scope) continue;
      // Only rows whose key is still this one (it cannot change, but a hand-edited file could).
      for (const slot of fold.rowsOf(request)) {
        const status = fold.statusOf(slot);
        const errorCode = fold.errorCodeOf(slot);
        // A job id (and a video) is read back from the spill only for a row that may be offered: one that
        // cannot be (a disk error) is not offered, a video that cannot be is offered as its job to check.
        const found = (): Found | undefined => {
          const jobId = fold.jobIdOf(slot);
          return jobId ? { batchId, fold, slot, jobId } : undefined;
        };
        if (status === 'succeeded' && fold.hasKept(slot)) {
          const video = found();
          if (!video) continue;
          video.kept = fold.keptOf(slot);
          if (!video.kept) follow ??= video;
          else if (!kept || newer(video.kept, kept.kept!)) kept = video;
        } else if (fold.hasJob(slot) && (!status || FOLLOW_CODES.has(errorCode ?? ''))) {
          follow ??= found();
        } else if (status === 'failed' && settledCode(errorCode)) {
          settled ??= found() ?? { batchId, fold, slot, jobId: '' };
        } else if (!fold.hasJob(slot)) {
          unknownSubmits += fold.unknownOf(slot);
        }
      }
    }
    if (!kept && !follow && !settled && !unknownSubmits) return undefined;
    const source = ({ batchId, fold, slot, jobId, kept }: Found): RequestSource => {
      const view = fold.view(slot, jobId || undefined, kept);
      return { batchId, rowId: view.rowId, view };
    };
    return {
      ...(kept
        ? { kept: source(kept) }
        : follow
          ? { follow: source(follow) }
          : settled
            ? { settled: source(settled) }
            : {}),
      unknownSubmits,
    };
  }

  /** Lets go of the spill file (the index is no longer used). */
  close(): void {
    this.spill.close();
  }
}

/** The later of two kept videos (a redo recorded later wins). */
function newer(a: KeptVideo, b: KeptVideo): boolean {
  return (a.submittedAt ?? '') > (b.submittedAt ?? '');
}

/**
 * The prior outcome a row gets from the index: the earlier batch's result to record (a kept video), or its
 * job to check first (a job that may still finish), with earlier unknown outcomes counted.
 */
export function priorFromIndex(
  row: PromptRow,
  reuse: Reuse,
  file?: { path: string; sha256?: string; bytes?: number },
): PriorOutcome {
  if (reuse.kept) {
    const { batchId, rowId, view } = reuse.kept;
    const kept = view.kept!;
    const result: PromptResult = {
      ...rowFields(row),
      status: 'succeeded',
      ...kept,
      file: undefined,
      sha256: undefined,
      bytes: undefined,
      ...(file ? { file: file.path, sha256: file.sha256, bytes: file.bytes } : {}),
      attempts: 0,
      polls: 0,
      finishedAt: new Date().toISOString(),
      reusedFrom: { batchId, rowId },
    };
    // A file that could not be linked here is not this batch's; the URL (and the other batch's file) remain.
    for (const k of ['file', 'sha256', 'bytes'] as const) if (result[k] === undefined) delete result[k];
    return { generation: 0, reused: result };
  }
  if (reuse.settled) {
    // Refused for its content, or a job the gateway forgot: recorded as it ended there, not paid for again.
    const { batchId, rowId, view } = reuse.settled;
    const result: PromptResult = {
      ...rowFields(row),
      status: 'failed',
      ...(view.jobId ? { jobId: view.jobId } : {}),
      errorCode: view.errorCode,
      errorMessage: `${batchId} row ${rowId} ended ${view.errorCode} for the same request; \`retry-failed --code ${view.errorCode}\` pays for it again`,
      attempts: 0,
      polls: 0,
      finishedAt: new Date().toISOString(),
      reusedFrom: { batchId, rowId },
    };
    return { generation: 0, reused: result };
  }
  if (reuse.follow) {
    const { batchId, rowId, view } = reuse.follow;
    return {
      generation: 0,
      jobId: view.jobId,
      // The followed job was made under the other batch's key: a new submit here starts at generation 0.
      jobGeneration: 0,
      followedFrom: { batchId, rowId },
      ...(reuse.unknownSubmits ? { unknownSubmits: reuse.unknownSubmits } : {}),
    };
  }
  return { generation: 0, unknownSubmits: reuse.unknownSubmits };
}

/** The batch id of a batch folder path. */
export const folderBatchId = (dir: string) => basename(dir);
