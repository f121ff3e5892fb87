// Where a vidbatch process's log entries go. The terminal gets one readable line per notable
// event ("row 12: status check failed: gateway answered 500 ... (attempt 3, retrying in 16 s)"); every entry,
// with the SDK's full failure objects, stacks and task tokens, goes to a log file under .vidbatch/logs/,
// whose path the first terminal line names. The gateway worker's "No workflows registered" warning is for
// the file only: that worker runs activities by design.
import { appendFileSync, mkdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { inspect } from 'node:util';
import type { LogEntry, LogLevel } from '@temporalio/worker';

const SEVERITY: LogLevel[] = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'];

export const LOG_DIR = join('.vidbatch', 'logs');

/** What each activity is to a user reading the terminal. */
const ACTIVITY_WORDS: Record<string, string> = {
  submitJob: 'submit',
  checkJob: 'check of the known job',
  pollJob: 'status check',
  stopJob: 'stop of a job no longer waited for',
  downloadVideo: 'download',
  recordResults: 'recording results',
  readRows: 'reading the CSV',
  endedPrompts: 'look for prompts that ended unheard',
};

/** Log messages that are noise to a user (kept in the file). */
const FILE_ONLY = [/^No workflows registered/];

/** Meta fields that never reach the terminal: opaque to users (the file keeps them). */
const HIDDEN = new Set([
  'taskToken',
  'namespace',
  'isLocal',
  'workflowRunId',
  'activityId',
  'sdkComponent',
  'target',
  'spanContexts',
]);

/**
 * The Rust core repeats itself while a condition lasts (a server it cannot reach: a line per call and retry,
 * each worded a little differently): the terminal shows at most one core line per this many ms, shortened;
 * the file keeps every one.
 */
export const CORE_REPEAT_MS = 60_000;
/** The most of a core line the terminal shows (its error chains run to several hundred characters). */
const CORE_LINE_CHARS = 160;

function timeOf(entry: LogEntry): Date {
  return new Date(Number(entry.timestampNanos / 1_000_000n));
}

function errorSummary(error: unknown): { text: string; retry?: string } {
  if (!(error instanceof Error)) return { text: String(error) };
  const text = error.message.split('\n')[0]!;
  const failure = error as Error & { nonRetryable?: boolean; nextRetryDelay?: unknown };
  if (failure.nonRetryable) return { text, retry: 'not retried; the row decides' };
  const delay = failure.nextRetryDelay;
  const ms = typeof delay === 'number' ? delay : undefined;
  if (ms !== undefined) return { text, retry: `retrying in ${Math.max(1, Math.round(ms / 1000))} s` };
  return { text, retry: 'retrying' };
}

/** The row a workflow id names (`<batch-id>/<row-id>`), if it names one. */
function rowOf(workflowId: unknown): string | undefined {
  if (typeof workflowId !== 'string') return undefined;
  const slash = workflowId.lastIndexOf('/');
  return slash < 0 ? undefined : workflowId.slice(slash + 1);
}

function shortValue(v: unknown): string {
  if (v instanceof Error) return v.message.split('\n')[0]!;
  if (typeof v === 'string') return v;
  return inspect(v, { depth: 1, breakLength: Infinity, compact: true });
}

/** One terminal line for an entry, or undefined when the entry is for the log file only. */
export function terminalLine(entry: LogEntry): string | undefined {
  const { message, meta = {} } = entry;
  if (FILE_ONLY.some((re) => re.test(message))) return undefined;
  const clock = timeOf(entry).toTimeString().slice(0, 8);
  if (meta.sdkComponent === 'core') {
    const text = message.split('\n')[0]!;
    return `${clock} Temporal core: ${text.length > CORE_LINE_CHARS ? `${text.slice(0, CORE_LINE_CHARS)}...` : text}`;
  }
  const row = rowOf(meta.workflowId);
  const who = row !== undefined ? `row ${row}: ` : '';
  if (message === 'Activity failed' && typeof meta.activityType === 'string') {
    const what = ACTIVITY_WORDS[meta.activityType] ?? meta.activityType;
    const { text, retry } = errorSummary(meta.error);
    const attempt = typeof meta.attempt === 'number' ? `attempt ${meta.attempt}` : undefined;
    const tail = [attempt, retry].filter(Boolean).join(', ');
    return `${clock} ${who}${what} failed: ${text}${tail ? ` (${tail})` : ''}`;
  }
  const shown = Object.entries(meta)
    .filter(([k]) => !HIDDEN.has(k) && k !== 'workflowId' && k !== 'workflowType' && k !== 'taskQueue')
    .map(([k, v]) => `${k}=${shortValue(v)}`);
  return `${clock} ${who}${message}${shown.length ? ` (${shown.join(', ')})` : ''}`;
}

/** The full entry as the log file keeps it: time, level, message, then every field (errors with stacks). */
export function fileLine(entry: LogEntry): string {
  const meta = entry.meta && Object.keys(entry.meta).length ? ` ${inspect(entry.meta, { depth: 6 })}` : '';
  return `${timeOf(entry).toISOString()} ${entry.level} ${entry.message}${meta}\n`;
}

export interface LogSinkOptions {
  /** Lowest level shown on the terminal (VIDBATCH_LOG_LEVEL; default WARN). */
  terminalLevel: LogLevel;
  /** Lowest level the file keeps (the lower of INFO and terminalLevel). */
  fileLevel: LogLevel;
  /** Name in the file name: the command, e.g. `run` or `worker`. */
  name: string;
  cwd?: string;
  write?: (line: string) => void;
}

/** A log function for DefaultLogger: the file gets every entry, the terminal the readable line of notable ones. */
export function createLogSink(options: LogSinkOptions): { log: (entry: LogEntry) => void; path: string } {
  const cwd = options.cwd ?? process.cwd();
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  const path = join(cwd, LOG_DIR, `${options.name}-${stamp}-${process.pid}.log`);
  // On a TTY a line first clears the progress bar's line; the bar redraws itself below on its next update.
  const write =
    options.write ??
    ((line: string) => process.stderr.write(process.stderr.isTTY ? `\r\x1b[2K${line}` : line));
  let fileBroken = false;
  let fileMade = false;
  let pointed = false;
  let coreShownAt: number | undefined;
  const repeatedCore = (entry: LogEntry): boolean => {
    if (entry.meta?.sdkComponent !== 'core') return false;
    const at = Number(entry.timestampNanos / 1_000_000n);
    if (coreShownAt !== undefined && at - coreShownAt < CORE_REPEAT_MS) return true;
    coreShownAt = at;
    return false;
  };
  const atLeast = (level: LogLevel, floor: LogLevel) => SEVERITY.indexOf(level) >= SEVERITY.indexOf(floor);
  const log = (entry: LogEntry): void => {
    if (!fileBroken && atLeast(entry.level, options.fileLevel)) {
      try {
        if (!fileMade) mkdirSync(join(cwd, LOG_DIR), { recursive: true });
        fileMade = true;
        appendFileSync(path, fileLine(entry));
      } catch (err) {
        // A log file that cannot be written must not stop the work: say so once, then use the terminal only.
        fileBroken = true;
        write(`vidbatch: cannot write the log file ${path} (${String(err)}); logging to the terminal only\n`);
      }
    }
    if (!atLeast(entry.level, options.terminalLevel) || repeatedCore(entry)) return;
    const line = fileBroken ? fileLine(entry).trimEnd() : terminalLine(entry);
    if (line === undefined) return;
    write(`${line}\n`);
    if (!pointed && !fileBroken) {
      pointed = true;
      write(`  (full details of every event: ${relative(process.cwd(), path) || path})\n`);
    }
  };
  return { log, path };
}
