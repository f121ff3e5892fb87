// Finding a batch's folder without Temporal: the output root's folder names are batch ids, so a batch id, a
// prefix of one, or the CSV a batch was made from (its sha256 is the id's first part) names a folder there. A
// batch whose server forgot it, or whose server is down, is found all the same. With VIDBATCH_STORE, the
// store's batch folders are looked at too (a local folder of the same batch comes first, as findManifest's).
import { existsSync, statSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { scopeDigest } from '../client/task-queue';
import { environmentTarget, loadStoreSetting } from '../config';
import { BATCH_ID } from '../contract/target';
import { ConfigError } from '../errors';
import { loadCsv } from '../input/csv';
import { openStore } from '../store/open-store';
import { joinStorePath } from '../store/store-url';

export interface BatchFolder {
  batchId: string;
  /** The folder holding manifest.jsonl and jobs.jsonl: a path here, or its URL in the store. */
  folder: string;
  /** The folder on this machine for the batch's pages (review.html, report.html): `<out-root>/<batch-id>`. */
  pageDir: string;
}

export interface FindOptions {
  /** The output root (`--out-root`, VIDBATCH_OUT_ROOT). */
  outRoot: string;
  env?: NodeJS.ProcessEnv;
  /** Told which batch was taken when a CSV names several. */
  log?: (message: string) => void;
}

/** Batch folder names in the root here and, with a store, in the store: where each is. */
async function batchFolders(outRoot: string, store: string | undefined): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  if (store) {
    const s = await openStore(store, outRoot);
    for await (const name of s.folders(''))
      if (BATCH_ID.test(name)) found.set(name, joinStorePath(store, name));
  }
  // Local folders win: the batch's results are where `run` here wrote them.
  for (const name of await readdir(outRoot).catch(() => [] as string[]))
    if (BATCH_ID.test(name)) found.set(name, resolve(outRoot, name));
  return found;
}

/** When a local folder was last written (its manifest, else the folder); 0 in the store. */
function lastWritten(folder: string): number {
  for (const path of [join(folder, 'manifest.jsonl'), folder]) {
    try {
      return statSync(path).mtimeMs;
    } catch {
      // not here: the next, or a folder in the store
    }
  }
  return 0;
}

/** The folder of the batch `ref` names (an id, a prefix of one, or its CSV); ConfigError (exit 2) if none. */
export async function findBatchFolder(ref: string, o: FindOptions): Promise<BatchFolder> {
  const env = o.env ?? process.env;
  const store = loadStoreSetting(env);
  const folders = await batchFolders(o.outRoot, store);
  const where = `${resolve(o.outRoot)}${store ? ` or ${store}` : ''}`;
  const at = (batchId: string): BatchFolder => ({
    batchId,
    folder: folders.get(batchId)!,
    pageDir: resolve(o.outRoot, batchId),
  });
  const hint = ' (the output root is --out-root or VIDBATCH_OUT_ROOT)';

  if (!BATCH_ID.test(ref) && existsSync(ref) && statSync(ref).isFile()) {
    const csv = await loadCsv(ref);
    const prefix = `batch-${csv.sha256.slice(0, 16)}-`;
    const ids = [...folders.keys()].filter((id) => id.startsWith(prefix));
    if (!ids.length) throw new ConfigError(`no batch of ${ref} has a folder in ${where}${hint}`);
    // Several targets or roots ran this file: this environment's own batch, else the latest written.
    const target = environmentTarget(env);
    const own = target && `${prefix}${scopeDigest({ target, root: store || o.outRoot }, 8)}`;
    ids.sort((a, b) => lastWritten(folders.get(b)!) - lastWritten(folders.get(a)!));
    const chosen = own && ids.includes(own) ? own : ids[0]!;
    if (ids.length > 1)
      (o.log ?? ((m) => console.error(m)))(
        `${ref} has ${ids.length} batch folders (${ids.join(', ')}): using ${chosen}; name another by its id`,
      );
    return at(chosen);
  }

  if (folders.has(ref)) return at(ref);
  if (BATCH_ID.test(ref)) throw new ConfigError(`${ref} has no folder in ${where}${hint}`);
  // A prefix of an id, with or without its `batch-`.
  const prefix = ref.startsWith('batch-') ? ref : `batch-${ref}`;
  const ids = /^batch-[0-9a-f-]+$/.test(prefix)
    ? [...folders.keys()].filter((id) => id.startsWith(prefix))
    : [];
  if (ids.length === 1) return at(ids[0]!);
  if (ids.length > 1)
    throw new ConfigError(
      `"${ref}" names ${ids.length} batches in ${where}: ${ids.sort().join(', ')}; give more of the id`,
    );
  throw new ConfigError(
    `"${ref}" is neither a batch id (or the start of one) with a folder in ${where}, nor a CSV file${hint}`,
  );
}
