// The output root's request index: which requests (input/request-key.ts) its batches already paid for. A new
// batch in the root consults it before paying: a request another batch kept a video for is recorded from that
// job at no cost, a job another batch made and may still finish is followed instead of paying again, and
// unknown submit outcomes count against the row's resend bound. Nothing is stored besides the batches' own
// manifests and jobs journals, which are read incrementally (a batch of 100k rows re-reads only what was
// appended since the last page). The root may be the shared store (VIDBATCH_STORE): its batch folders are
// read the same way, as object logs.
import { readdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { objectAt } from '../store/open-store';
import { isStoreUrl, joinStorePath } from '../store/store-url';
import { isContentRefusal, JOB_GONE_CODE, type PromptResult } from '../contract/prompt';
import { rowFields, type PriorOutcome, type PromptRow } from '../contract/rows';
import { scopeOfBatch } from '../contract/target';
import { FolderPrior, type PriorFold, type RowView } from './prior';

/**
 * Error codes of rows whose job may still end with a video: vidbatch stopped waiting for it, or lost its
 * URL. Another batch follows such a job (checks it first) before paying.
 */
export const FOLLOW_CODES: ReadonlySet<string> = new Set([
  'cancelled',
  'deadline_exceeded',
  'workflow_failed',
  'check_failed',
  'poll_failed',
  'url_expired',
]);

/** Where an earlier batch's row stands for a request. */
export interface RequestSource {
  batchId: string;
  rowId: string;
  view: RowView;
}

/**
 * What the index offers a row: a video to reuse, a job to follow, an outcome paying again would not change
 * (refused for its content, or a job the gateway forgot), or earlier unknown outcomes to count.
 */
export interface Reuse {
  kept?: RequestSource;
  follow?: RequestSource;
  settled?: RequestSource;
  unknownSubmits: number;
}

/** Rows that ended this way are not paid for again by accident, from this file or another (`retry-failed --code`). */
const settledCode = (code: string | undefined) => code === JOB_GONE_CODE || isContentRefusal(code);

/** A folder's rows by request key, and the folder's fold. */
interface Folder {
  prior: FolderPrior;
  fold?: PriorFold;
  rowsByRequest: Map<string, Set<string>>;
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

  constructor(readonly root: string) {}

  /**
   * Reads what the root's batch folders of `except`'s scope gained since the last refresh (new folders
   * included). `except`, the asking batch's own folder, is never read: its rows are its own prior, folded
   * elsewhere. A batch of another target (another gateway account, or `--simulate`) is never read: its jobs
   * were not made where this batch pays, so nothing of it is reused or followed.
   */
  async refresh(except: string): Promise<this> {
    const scope = scopeOfBatch(except);
    const store = isStoreUrl(this.root);
    const names = store
      ? await storeFolders(this.root)
      : await readdir(this.root).catch(() => [] as string[]);
    for (const name of names.filter((n) => n !== except && scope && scopeOfBatch(n) === scope)) {
      let folder = this.folders.get(name);
      if (!folder) {
        const dir = store ? joinStorePath(this.root, name) : join(this.root, name);
        folder = { prior: new FolderPrior(dir), rowsByRequest: new Map() };
        this.folders.set(name, folder);
      }
      const { fold, mentions, reset } = await folder.prior.update();
      if (reset) folder.rowsByRequest.clear();
      folder.fold = fold;
      for (const [request, rowId] of mentions) {
        let rows = folder.rowsByRequest.get(request);
        if (!rows) folder.rowsByRequest.set(request, (rows = new Set()));
        rows.add(rowId);
      }
    }
    return this;
  }

  /** What other batches than `except` know of `request` (undefined: nothing). */
  lookup(request: string, except: string): Reuse | undefined {
    let kept: RequestSource | undefined;
    let follow: RequestSource | undefined;
    let settled: RequestSource | undefined;
    let unknownSubmits = 0;
    const scope = scopeOfBatch(except);
    for (const [batchId, folder] of this.folders) {
      // Only batches of the asker's target and root: one index serves every batch of the root.
      if (batchId === except || !folder.fold || !scope || scopeOfBatch(batchId) !== scope) continue;
      for (const rowId of folder.rowsByRequest.get(request) ?? []) {
        const view = folder.fold.view(rowId);
        // A row whose key changed since (it cannot, but a hand-edited file could) is not this request.
        if (!view || view.request !== request) continue;
        const source = { batchId, rowId, view };
        if (view.status === 'succeeded' && view.kept) {
          if (!kept || newer(view, kept.view)) kept = source;
        } else if (view.jobId && (!view.status || FOLLOW_CODES.has(view.errorCode ?? ''))) {
          follow ??= source;
        } else if (view.status === 'failed' && settledCode(view.errorCode)) {
          settled ??= source;
        } else if (!view.jobId) {
          unknownSubmits += view.unknownSubmits;
        }
      }
    }
    if (!kept && !follow && !settled && !unknownSubmits) return undefined;
    return { ...(kept ? { kept } : follow ? { follow } : settled ? { settled } : {}), unknownSubmits };
  }
}

/** The later of two kept videos (a redo recorded later wins). */
function newer(a: RowView, b: RowView): boolean {
  return (a.kept?.submittedAt ?? '') > (b.kept?.submittedAt ?? '');
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
