// The folders each `vidbatch run` of this folder lets its in-process worker use besides the configured roots
// (its CSV's folder, --out-root, --download): one file per session under `.vidbatch/allow/`, removed when the
// session closes. Processes of a folder with the same settings share one task queue, so any of their workers
// may take a task of another's batch; without these files it would refuse that batch's paths (PathNotAllowed)
// and the task would wait for a retry that happens to reach the right process.
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { alive, STATE_DIR } from './local-server';

/** Where the sessions of this folder register what they allow. */
export const ALLOW_DIR = join(STATE_DIR, 'allow');

type Kind = 'input' | 'out' | 'download';
const KINDS: readonly Kind[] = ['input', 'out', 'download'];
export type Allowances = Record<Kind, string[]>;

interface Registration extends Allowances {
  pid: number;
  /** Only workers polling this queue can be given the session's tasks, so only they consult it. */
  taskQueue: string;
}

/** `<pid>-<n>.json`, and `.tmp` while it is written: one process may open several sessions. */
const FILE_NAME = /^(\d+)-([0-9a-z]+)\.(json|tmp)$/;
let sequence = 0;

/** Records what this session's worker allows for the workers on `taskQueue`; returns the removal. */
export async function registerAllowances(
  dir: string,
  taskQueue: string,
  allow: Partial<Allowances>,
): Promise<() => Promise<void>> {
  const lists = Object.fromEntries(
    KINDS.map((kind) => [kind, (allow[kind] ?? []).filter(isAbsolute)]),
  ) as Allowances;
  if (!KINDS.some((kind) => lists[kind].length)) return async () => {};
  await mkdir(dir, { recursive: true });
  const name = `${process.pid}-${(sequence++).toString(36)}`;
  const record: Registration = { pid: process.pid, taskQueue, ...lists };
  // Renamed into place, so a reader never sees half a file.
  await writeFile(join(dir, `${name}.tmp`), JSON.stringify(record));
  await rename(join(dir, `${name}.tmp`), join(dir, `${name}.json`));
  return () => rm(join(dir, `${name}.json`), { force: true });
}

export interface LiveAllowancesOptions {
  /** How long a look at the folder serves paths it allows; default 1 s. A path it refuses is looked up again. */
  cacheMs?: number;
  now?: () => number;
}

/**
 * The union of what the live sessions on `taskQueue` registered in `dir`: `fresh` reads the folder now (a
 * listing, then only the files that are new or changed), else a look started less than `cacheMs` ago will do. Files of
 * dead processes are removed; unreadable ones are ignored.
 */
export function liveAllowances(
  dir: string,
  taskQueue: string,
  options: LiveAllowancesOptions = {},
): (fresh: boolean) => Promise<Allowances> {
  const cacheMs = options.cacheMs ?? 1000;
  const now = options.now ?? Date.now;
  const files = new Map<string, { mtimeMs: number; size: number; record?: Registration }>();
  let cached: { at: number; lists: Allowances } | undefined;
  let inflight: { startedAt: number; lists: Promise<Allowances> } | undefined;

  const look = async (): Promise<Allowances> => {
    const lists: Allowances = { input: [], out: [], download: [] };
    const names = await readdir(dir).catch(() => [] as string[]);
    const seen = new Set<string>();
    for (const name of names) {
      const m = FILE_NAME.exec(name);
      if (!m) continue;
      const file = join(dir, name);
      if (!alive(Number(m[1]))) {
        await rm(file, { force: true }).catch(() => undefined);
        continue;
      }
      if (m[3] !== 'json') continue;
      const st = await stat(file).catch(() => undefined);
      if (!st) continue;
      let entry = files.get(name);
      if (!entry || entry.mtimeMs !== st.mtimeMs || entry.size !== st.size) {
        entry = {
          mtimeMs: st.mtimeMs,
          size: st.size,
          record: parse(await readFile(file, 'utf8').catch(() => '')),
        };
        files.set(name, entry);
      }
      seen.add(name);
      if (entry.record?.taskQueue !== taskQueue) continue;
      for (const kind of KINDS) lists[kind].push(...entry.record[kind]);
    }
    for (const name of files.keys()) if (!seen.has(name)) files.delete(name);
    return lists;
  };

  return (fresh) => {
    // A fresh look is never shared with one already under way: that one may have listed the folder before
    // the registration the caller needs was written.
    if (!fresh) {
      const since = now() - cacheMs;
      if (cached && cached.at >= since) return Promise.resolve(cached.lists);
      if (inflight && inflight.startedAt >= since) return inflight.lists;
    }
    const startedAt = now();
    const lists = look()
      .catch((): Allowances => ({ input: [], out: [], download: [] }))
      .then((found) => {
        if (!cached || cached.at <= startedAt) cached = { at: startedAt, lists: found };
        return found;
      });
    const current = { startedAt, lists };
    inflight = current;
    void lists.finally(() => {
      if (inflight === current) inflight = undefined;
    });
    return lists;
  };
}

function parse(text: string): Registration | undefined {
  try {
    const value = JSON.parse(text) as Partial<Registration>;
    if (typeof value.taskQueue !== 'string') return undefined;
    const lists = Object.fromEntries(
      KINDS.map((kind) => {
        const list = value[kind];
        return [
          kind,
          Array.isArray(list) ? list.filter((p): p is string => typeof p === 'string' && isAbsolute(p)) : [],
        ];
      }),
    ) as Allowances;
    return { pid: Number(value.pid), taskQueue: value.taskQueue, ...lists };
  } catch {
    return undefined;
  }
}

/**
 * For a session whose worker polls the folder's own queue (task-queue.ts): registers `allow` (removed by
 * `cleanups`, after the worker stops) and returns the `shared` roots that read the others' registrations.
 */
export async function shareAllowances(
  dir: string,
  taskQueue: string,
  allow: Partial<Allowances> | undefined,
  cleanups: (() => Promise<void>)[],
): Promise<{ shared: (fresh: boolean) => Promise<Allowances> }> {
  if (allow) cleanups.push(await registerAllowances(dir, taskQueue, allow));
  return { shared: liveAllowances(dir, taskQueue) };
}
