// Who owns the dev server (and so the SQLite file) in this folder: `.vidbatch/server.json`, claimed with an
// exclusive create before the server starts, filled in with its address once it answers, removed on exit. One
// process at a time opens the database; every other vidbatch command here talks to that process's server, or
// waits while the owner is only starting or is a short-lived operator command.
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';

/** vidbatch's working folder in the current directory (dev server database, simulator state). */
export const STATE_DIR = '.vidbatch';
export const LOCAL_SERVER_FILE = join(STATE_DIR, 'server.json');
/** One empty file per process using another process's server here: the owner keeps it up while any lives. */
const USERS_DIR = join(STATE_DIR, 'server-users');

/**
 * `server`: `vidbatch server` (stays up, shared); `run`: a `vidbatch run` with its embedded server (shared
 * while it runs); `operator`: an operator command that opened the database for itself (others wait).
 */
export type LocalServerOwner = 'server' | 'run' | 'operator';

export interface LocalServerInfo {
  pid: number;
  owner: LocalServerOwner;
  /** Absent while the server is starting. */
  address?: string;
  uiUrl?: string;
  dbFile?: string;
}

/** Whether a process with this pid runs (one of another user's too). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, someone else's
  }
}

async function readInfo(): Promise<LocalServerInfo | 'missing' | 'unreadable'> {
  let text: string;
  try {
    text = await readFile(LOCAL_SERVER_FILE, 'utf8');
  } catch {
    return 'missing';
  }
  try {
    return JSON.parse(text) as LocalServerInfo;
  } catch {
    return 'unreadable'; // torn while its owner writes it, or garbage
  }
}

/** Whether a Temporal frontend answers at `address` within about a second. */
export async function answers(address: string): Promise<boolean> {
  try {
    const connection = await Connection.connect({ address, connectTimeout: 1500 });
    try {
      await connection.workflowService.getSystemInfo({});
      return true;
    } finally {
      await connection.close();
    }
  } catch {
    return false;
  }
}

/**
 * The server another vidbatch process runs here, once it answers. Waits (up to `waitMs`) while the owner is
 * starting its server or is an operator command using the database for a moment. undefined: no one owns it
 * (a record left by a dead process is removed). Throws when a live owner's server does not answer in time.
 */
export async function findLocalServer(
  waitMs = 60_000,
  log: (m: string) => void = () => {},
): Promise<LocalServerInfo | undefined> {
  const deadline = Date.now() + waitMs;
  let told = false;
  for (;;) {
    const info = await readInfo();
    if (info === 'missing') return undefined;
    if (info === 'unreadable') {
      // A write in progress takes microseconds; unreadable twice is garbage.
      await sleep(100);
      if ((await readInfo()) === 'unreadable') await rm(LOCAL_SERVER_FILE, { force: true });
      continue;
    }
    if (!alive(info.pid)) {
      await forgetLocalServer(info.pid);
      continue;
    }
    if (info.address && info.owner !== 'operator' && (await answers(info.address))) return info;
    if (Date.now() > deadline) {
      throw new Error(
        `vidbatch (pid ${info.pid}) owns the dev server here${info.address ? ` at ${info.address}` : ''} but it did not answer within ${Math.round(waitMs / 1000)} s; stop that process (or remove ${LOCAL_SERVER_FILE} if it is not vidbatch)`,
      );
    }
    if (!told) {
      log(
        info.owner === 'operator'
          ? `Waiting for another vidbatch command (pid ${info.pid}) to finish with the dev server database...`
          : `Waiting for the dev server vidbatch (pid ${info.pid}) is starting...`,
      );
      told = true;
    }
    await sleep(250);
  }
}

/** Claims the folder's dev server for this process; false when another process holds the claim. */
export async function claimLocalServer(owner: LocalServerOwner, dbFile?: string): Promise<boolean> {
  await mkdir(STATE_DIR, { recursive: true });
  const info: LocalServerInfo = { pid: process.pid, owner, ...(dbFile ? { dbFile } : {}) };
  try {
    await writeFile(LOCAL_SERVER_FILE, JSON.stringify(info), { flag: 'wx' });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}

/** Fills in the address of the server this process claimed. */
export async function recordLocalServer(info: LocalServerInfo): Promise<void> {
  await mkdir(STATE_DIR, { recursive: true });
  await writeFile(LOCAL_SERVER_FILE, JSON.stringify(info));
}

/** Removes the record, only when it is this process's (or `pid`'s, for a dead owner's). */
export async function forgetLocalServer(pid = process.pid): Promise<void> {
  const info = await readInfo();
  if (typeof info === 'object' && info.pid !== pid) return;
  await rm(LOCAL_SERVER_FILE, { force: true });
}

/** Marks this process as a user of the server another process owns here; returns the unmark. */
export async function useLocalServer(): Promise<() => Promise<void>> {
  await mkdir(USERS_DIR, { recursive: true });
  const mark = join(USERS_DIR, String(process.pid));
  await writeFile(mark, '');
  return () => rm(mark, { force: true });
}

/** The live processes using this process's server (marks of dead ones are removed). */
export async function localServerUsers(): Promise<number[]> {
  const names = await readdir(USERS_DIR).catch(() => [] as string[]);
  const live: number[] = [];
  for (const name of names) {
    const pid = Number(name);
    if (pid === process.pid) continue;
    if (Number.isInteger(pid) && alive(pid)) live.push(pid);
    else await rm(join(USERS_DIR, name), { force: true });
  }
  return live;
}
