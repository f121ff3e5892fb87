// The Temporal Runtime of a vidbatch process: log level and format, Prometheus metrics. Installed once, by
// the CLI, before any connection or worker exists.
import { DefaultLogger, Runtime, type LogEntry, type LogLevel } from '@temporalio/worker';
import { createLogSink } from './log-sink';

export interface RuntimeSettings {
  /** VIDBATCH_LOG_LEVEL: TRACE, DEBUG, INFO, WARN (default) or ERROR. */
  logLevel?: LogLevel;
  /** VIDBATCH_LOG_FORMAT=json: one JSON object per line on stderr, for log shippers. */
  json?: boolean;
  /** Otherwise the terminal gets one line per notable event and a file under .vidbatch/logs/ every entry;
   * `name` (the command) names that file. */
  name?: string;
  /** VIDBATCH_METRICS_ADDRESS / --metrics: serve Prometheus metrics at http://<address>/metrics. */
  metricsAddress?: string;
}

function jsonLine(entry: LogEntry): void {
  const { message, level, timestampNanos, meta } = entry;
  const time = new Date(Number(timestampNanos / 1_000_000n)).toISOString();
  // Errors do not serialise by themselves; keep their message only (stacks stay in text logs).
  const fields = Object.fromEntries(
    Object.entries(meta ?? {}).map(([k, v]) => [k, v instanceof Error ? v.message : v]),
  );
  process.stderr.write(`${JSON.stringify({ time, level, message, ...fields })}\n`);
}

export function runtimeSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): RuntimeSettings {
  return {
    logLevel: (env.VIDBATCH_LOG_LEVEL?.toUpperCase() as LogLevel | undefined) ?? 'WARN',
    json: env.VIDBATCH_LOG_FORMAT === 'json',
    metricsAddress: env.VIDBATCH_METRICS_ADDRESS || undefined,
  };
}

let installed: RuntimeSettings = {};

/** A line for the operator at start-up: plain text on stderr, or a JSON log entry in JSON mode. */
export function announce(message: string, meta: Record<string, unknown> = {}): void {
  if (installed.json) Runtime.instance().logger.info(message, meta);
  else console.error(message);
}

function logger(settings: RuntimeSettings): DefaultLogger {
  const level = settings.logLevel ?? 'WARN';
  if (settings.json) return new DefaultLogger(level, jsonLine);
  // The file keeps INFO and above (worker state changes, each 429) even when the terminal shows WARN only.
  const fileLevel = level === 'TRACE' || level === 'DEBUG' ? level : 'INFO';
  const sink = createLogSink({ terminalLevel: level, fileLevel, name: settings.name ?? 'vidbatch' });
  return new DefaultLogger(fileLevel, sink.log);
}

export function installRuntime(settings: RuntimeSettings): void {
  installed = settings;
  const level = settings.logLevel ?? 'WARN';
  Runtime.install({
    logger: logger(settings),
    telemetryOptions: {
      // The Rust core's own lines (e.g. a connection the server dropped) go through the same logger, so they
      // reach the log file and the terminal's one-line format instead of raw tracing output on stderr.
      logging: { filter: { core: level, other: 'ERROR' }, forward: {} },
      ...(settings.metricsAddress
        ? { metrics: { prometheus: { bindAddress: settings.metricsAddress, countersTotalSuffix: true } } }
        : {}),
    },
  });
}

/**
 * Ends the Runtime once the command is done. With the core's logs forwarded, the Runtime holds a callback into
 * JavaScript that keeps the process alive, and it ends by itself only when its last worker or native
 * connection closes: a command that opened none (`validate`, `status`) would never exit.
 */
export async function shutdownRuntime(): Promise<void> {
  await Runtime._instance?.shutdown();
}
