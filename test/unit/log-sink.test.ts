import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import type { LogEntry } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { createLogSink, terminalLine } from '../../src/worker/log-sink';

const at = BigInt(Date.UTC(2026, 10, 25, 2, 14, 5)) * 1_000_000n;
const activityMeta = {
  activityType: 'pollJob',
  attempt: 3,
  workflowId: 'batch-0123456789abcdef/r12',
  taskToken: 'CiQ2ZjA...',
  namespace: 'default',
};

function entry(message: string, meta?: Record<string, unknown>, level: LogEntry['level'] = 'WARN'): LogEntry {
  return { level, message, meta, timestampNanos: at };
}

describe('terminalLine', () => {
  it('says which row, what failed, the first line of the error and what happens next', () => {
    const error = ApplicationFailure.create({
      message: 'GET /videos/x: 500 Internal error.\nmore',
      nextRetryDelay: 16_000,
    });
    const line = terminalLine(entry('Activity failed', { ...activityMeta, error }))!;
    expect(line).toMatch(
      / row r12: status check failed: GET \/videos\/x: 500 Internal error\. \(attempt 3, retrying in 16 s\)$/,
    );
    expect(line).not.toContain('CiQ2ZjA');
    expect(line).not.toContain('more');
  });

  it('a failure the activity does not retry says so', () => {
    const error = ApplicationFailure.create({ message: 'refused', nonRetryable: true });
    const line = terminalLine(
      entry('Activity failed', { ...activityMeta, activityType: 'submitJob', error }),
    )!;
    expect(line).toContain('row r12: submit failed: refused (attempt 3, not retried; the row decides)');
  });

  it('keeps the gateway worker warning and opaque fields off the terminal', () => {
    expect(terminalLine(entry('No workflows registered, not polling for workflow tasks'))).toBeUndefined();
    const line = terminalLine(entry('submit outcome unknown', { ...activityMeta, jobId: 'vid_1' }))!;
    expect(line).toContain('row r12: submit outcome unknown (');
    expect(line).toContain('jobId=vid_1');
    expect(line).not.toContain('taskToken');
  });
});

/** A sink at the default levels whose terminal lines are collected. */
function terminalAndFile(cwd: string) {
  const shown: string[] = [];
  const sink = createLogSink({
    terminalLevel: 'WARN',
    fileLevel: 'INFO',
    name: 'run',
    cwd,
    write: (l) => shown.push(l),
  });
  return { sink, shown };
}

describe('createLogSink', () => {
  it('writes every entry to the file, and readable lines at the terminal level with one pointer to the file', async () => {
    const cwd = await mkdtemp(join(tmpdir(), 'vidbatch-logs-'));
    const { sink, shown } = terminalAndFile(cwd);
    sink.log(entry('Worker state changed', { state: 'RUNNING' }, 'INFO'));
    const error = ApplicationFailure.create({ message: 'boom' });
    sink.log(entry('Activity failed', { ...activityMeta, error }));
    sink.log(entry('Activity failed', { ...activityMeta, attempt: 4, error }));
    expect(shown.filter((l) => l.includes('full details'))).toHaveLength(1);
    expect(shown.join('')).not.toContain('Worker state changed');
    expect(sink.path).toMatch(/\.vidbatch\/logs\/run-\d{8}-\d{6}-\d+\.log$/);
    const file = await readFile(sink.path, 'utf8');
    expect(file).toContain('INFO Worker state changed');
    expect(file).toContain('CiQ2ZjA'); // the task token is kept for whoever debugs
    expect(file).toMatch(/^\s+at /m); // and the stack
  });

  it('falls back to the terminal when the file cannot be written', async () => {
    const cwd = await mkdtemp(join(tmpdir(), 'vidbatch-logs-'));
    await writeFile(join(cwd, '.vidbatch'), 'a file where the folder should be');
    const { sink, shown } = terminalAndFile(cwd);
    sink.log(entry('Activity failed', { ...activityMeta, error: new Error('boom') }));
    expect(shown[0]).toMatch(/cannot write the log file .*logging to the terminal only/);
    expect(shown.join('')).toContain('boom');
  });

  it('shows at most one Rust-core line a minute on the terminal, shortened, and every one in the file', async () => {
    const cwd = await mkdtemp(join(tmpdir(), 'vidbatch-logs-'));
    const { sink, shown } = terminalAndFile(cwd);
    const core = (seconds: number, message: string) => ({
      level: 'WARN' as const,
      message,
      meta: { sdkComponent: 'core', target: 'temporal_client::retry', spanContexts: [] },
      timestampNanos: at + BigInt(seconds) * 1_000_000_000n,
    });
    const long = `gRPC call poll_workflow_task_queue retried 5 times (error=${'tcp connect error '.repeat(20)})`;
    sink.log(core(0, long));
    for (const s of [1, 2, 30]) sink.log(core(s, `gRPC call describe_task_queue retried ${s} times`));
    sink.log(core(61, 'gRPC call poll_activity_task_queue retried 9 times'));
    const lines = shown.filter((l) => !l.includes('full details'));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /^\d\d:\d\d:\d\d Temporal core: gRPC call poll_workflow_task_queue retried 5 times .*\.\.\.\n$/,
    );
    expect(lines[0]!.length).toBeLessThan(200);
    expect(lines[1]).toContain('Temporal core: gRPC call poll_activity_task_queue retried 9 times');
    expect(lines.join('')).not.toContain('spanContexts');
    const file = await readFile(sink.path, 'utf8');
    expect(file.match(/WARN gRPC call/g)).toHaveLength(5);
  });
});
