// A `vidbatch worker` process for the bench: its own process, so that its peak RSS is its own and it can be
// SIGKILLed mid-run (`--kill-worker-at`) like a crashed machine.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../bin/vidbatch.mjs', import.meta.url));

export interface WorkerProcess {
  pid: number;
  /** Peak RSS (VmHWM) in MB; after the process is gone, the last figure read. */
  peakRssMb: () => number;
  /** SIGKILL: no shutdown, no restart. */
  kill: () => void;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
  stop: (graceMs?: number) => Promise<void>;
}

export function startWorker(env: Record<string, string>, heapMb?: number): Promise<WorkerProcess> {
  const heap = heapMb ? [`--max-old-space-size=${heapMb}`] : [];
  const child = spawn(process.execPath, [...heap, CLI, 'worker'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let lastRssMb = 0;
  const peakRssMb = () => {
    try {
      const kb = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1];
      lastRssMb = Math.max(lastRssMb, Number(kb ?? 0) / 1024);
    } catch {
      // gone (killed or stopped): keep the last figure
    }
    return lastRssMb;
  };
  return new Promise((resolve, reject) => {
    let err = '';
    let ready = false;
    child.stderr.on('data', (d: Buffer) => {
      if (ready) return; // keep draining the pipe, stop keeping its text
      err += d.toString();
      if (!err.includes('polling task queue')) return;
      ready = true;
      resolve({
        pid: child.pid!,
        peakRssMb,
        kill: () => {
          peakRssMb();
          child.kill('SIGKILL');
        },
        stop: async (graceMs = 10_000) => {
          if (child.exitCode !== null || child.signalCode !== null) return;
          peakRssMb();
          child.kill('SIGTERM');
          const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
          await exited;
          clearTimeout(timer);
        },
      });
    });
    child.on('exit', (code) => {
      if (!ready) reject(new Error(`worker exited ${code}: ${err}`));
    });
  });
}
