// The dev server a vidbatch command embedded on this machine, recorded in `.vidbatch/server.json` while it
// runs, so other vidbatch commands here use it instead of starting their own.
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** vidbatch's working folder in the current directory (dev server database, simulator state). */
export const STATE_DIR = '.vidbatch';
const LOCAL_SERVER_FILE = join(STATE_DIR, 'server.json');

export interface LocalServerInfo {
  address: string;
  uiUrl?: string;
  pid: number;
}

/** The recorded server, if the process that runs it is still alive. */
export async function runningLocalServer(): Promise<LocalServerInfo | undefined> {
  try {
    const info = JSON.parse(await readFile(LOCAL_SERVER_FILE, 'utf8')) as LocalServerInfo;
    process.kill(info.pid, 0); // throws when that process is gone
    return info;
  } catch {
    return undefined;
  }
}

export async function recordLocalServer(info: LocalServerInfo): Promise<void> {
  await mkdir(STATE_DIR, { recursive: true }); // VIDBATCH_DB_FILE may live elsewhere
  await writeFile(LOCAL_SERVER_FILE, JSON.stringify(info));
}

export async function forgetLocalServer(): Promise<void> {
  await rm(LOCAL_SERVER_FILE, { force: true });
}
