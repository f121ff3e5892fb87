// Where activities may touch the worker's disk. Workflow input names paths (csvPath, outDir, downloadDir) and row
// or batch ids that become file names, and anyone who can start a workflow on the task queue writes that input,
// so every path is checked against the roots the worker was started with before it is read or written.
import { realpath } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { PathNotAllowedError } from '../errors';
import { checkKey } from '../store/object-store';
import { isStoreUrl, joinStorePath } from '../store/store-url';
import { pathNotAllowed } from './to-failure';

/** The folders a worker may use, each kind a list (a file is allowed when it is under any of them). */
export interface PathRoots {
  /** CSVs are read only under these (VIDBATCH_INPUT_ROOT, plus the out root where retry-failed writes its CSV). */
  input: string[];
  /** Manifests are written only under these (VIDBATCH_OUT_ROOT). */
  out: string[];
  /** Videos are downloaded only under these (VIDBATCH_DOWNLOAD_ROOT, default the out root). */
  download: string[];
  /**
   * More folders, asked only for a path outside the lists above: the in-process worker of a `vidbatch run`
   * shares its queue with the other processes of its folder that have the same settings, so it runs their rows
   * and allows what they allow (dev-server/allowances.ts). Never set for `vidbatch worker`.
   */
  shared?: SharedRoots;
}
export type RootKind = 'input' | 'out' | 'download';

/** Absolute folders by kind; `fresh`: read now (a miss must not be a stale copy), else a recent copy will do. */
export type SharedRoots = (fresh: boolean) => Promise<Partial<Record<RootKind, string[]>>>;

/** The setting an operator changes to allow another folder, named in every refusal. */
export const ROOT_ENV: Record<RootKind, string> = {
  input: 'VIDBATCH_INPUT_ROOT',
  out: 'VIDBATCH_OUT_ROOT',
  download: 'VIDBATCH_DOWNLOAD_ROOT',
};

/**
 * The path with every symlink of its existing part resolved: the realpath of the deepest ancestor that
 * exists, plus the components that do not exist yet (which therefore cannot be symlinks).
 */
export async function realPathOf(path: string): Promise<string> {
  const absolute = resolve(path);
  const missing: string[] = [];
  let existing = absolute;
  for (;;) {
    try {
      return join(await realpath(existing), ...missing.reverse());
    } catch {
      const parent = dirname(existing);
      if (parent === existing) return absolute;
      missing.push(basename(existing));
      existing = parent;
    }
  }
}

/** True when `path` is `root` or inside it (both already absolute and real). */
export function isWithin(path: string, root: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

/**
 * The real absolute path of `path` when it is under one of the roots of `kind`; throws PathNotAllowedError
 * otherwise (absolute paths elsewhere, `..`, symlinks pointing out of the root).
 */
export async function confine(path: string, kind: RootKind, roots: PathRoots): Promise<string> {
  if (isStoreUrl(path)) {
    // A URL into a store root (VIDBATCH_STORE): under it, with no part that could climb out or alias.
    for (const root of roots[kind].filter(isStoreUrl))
      if (
        path.startsWith(`${root.replace(/\/+$/, '')}/`) &&
        validKey(path.slice(root.length).replace(/^\//, ''))
      )
        return path;
    throw new PathNotAllowedError(path, roots[kind].filter(isStoreUrl), 'VIDBATCH_STORE');
  }
  const real = await realPathOf(path);
  if (await underAny(real, roots[kind])) return real;
  // Checked as strictly as the worker's own roots: each folder's realpath, the path's realpath under it.
  if (roots.shared)
    for (const fresh of [false, true])
      if (await underAny(real, ((await roots.shared(fresh))[kind] ?? []).filter(isAbsolute))) return real;
  throw new PathNotAllowedError(path, roots[kind], ROOT_ENV[kind]);
}

async function underAny(real: string, roots: string[]): Promise<boolean> {
  for (const root of roots.filter((r) => !isStoreUrl(r)))
    if (isWithin(real, await realPathOf(root))) return true;
  return false;
}

/**
 * `dir/name` under a root of `kind`, where `name` (made from a row id) must be one plain file name: it can
 * neither climb out of `dir` nor name a folder.
 */
export async function confineFile(
  dir: string,
  name: string,
  kind: RootKind,
  roots: PathRoots,
): Promise<string> {
  if (!name || name !== basename(name) || name === '.' || name === '..' || name.includes('\0'))
    throw new PathNotAllowedError(join(dir, name), roots[kind], ROOT_ENV[kind]);
  return confine(isStoreUrl(dir) ? joinStorePath(dir, name) : join(dir, name), kind, roots);
}

function validKey(key: string): boolean {
  try {
    checkKey(key);
    return true;
  } catch {
    return false;
  }
}

/**
 * For activities: `path` confined to the roots of `kind` (undefined roots: not confined, for embedding and
 * tests that build a worker themselves); a refusal becomes the non-retryable `PathNotAllowed` failure.
 */
export async function allowedPath(
  path: string,
  kind: RootKind,
  roots: PathRoots | undefined,
): Promise<string> {
  if (!roots) return isStoreUrl(path) ? path : resolve(path);
  return confine(path, kind, roots).catch((err: unknown) => {
    throw err instanceof PathNotAllowedError ? pathNotAllowed(err) : err;
  });
}

/** For activities: `dir/name` as `confineFile` checks it (the name is checked even when unconfined), failing as `allowedPath` does. */
export async function allowedFile(
  dir: string,
  name: string,
  kind: RootKind,
  roots: PathRoots | undefined,
): Promise<string> {
  const check = confineFile(dir, name, kind, roots ?? { input: [dir], out: [dir], download: [dir] });
  return check.catch((err: unknown) => {
    throw err instanceof PathNotAllowedError ? pathNotAllowed(err) : err;
  });
}
