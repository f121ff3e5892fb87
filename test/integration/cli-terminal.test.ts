// A terminal a person can read: a spawned `vidbatch worker` whose jobs answer badly prints one
// line per event ("row r3: status check failed: ... (attempt 2, retrying in 1 s)"), never the SDK's failure
// objects, stacks or task tokens, nor the gateway worker's "No workflows registered"; those go to the log
// file under .vidbatch/logs/ that the first line names.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, vidbatch } from './cli-helpers';
import { cliEnv, testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  await env?.close();
  env = undefined;
});

const FAST = ['--first-poll', '0.5', '--poll-interval', '0.5', '--poll-cap', '1', '--no-adaptive-poll'];

describe('vidbatch worker prints a line per event and keeps the details in a log file', () => {
  it('bad answers for some jobs: readable lines on the terminal, stacks and task tokens in the file', async () => {
    env = await testEnv({ jobSeconds: 1, jobJitterSeconds: 0.3, seed: 6, faults: { jobError5xx: 0.3 } });
    const workDir = join(env.dir, 'worker');
    await mkdir(workDir);
    const worker = spawn(process.execPath, [CLI, 'worker'], {
      cwd: workDir,
      env: cliEnv(env, { VIDBATCH_OUT_ROOT: join(env.dir, 'out') }),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(worker);
    let stderr = '';
    worker.stderr.on('data', (d: Buffer) => (stderr += d.toString()));

    const tag = randomUUID().slice(0, 8);
    const lines = [
      'id,prompt',
      ...Array.from({ length: 8 }, (_, i) => `r${i + 1},a quiet harbour ${tag} ${i}`),
    ];
    await writeFile(join(env.dir, 't.csv'), lines.join('\n') + '\n');
    const run = await vidbatch(['run', 't.csv', '--job-deadline', '6', ...FAST], {
      cwd: env.dir,
      env: {
        TEMPORAL_ADDRESS: env.address,
        VIDBATCH_TASK_QUEUE: env.taskQueue,
        GATEWAY_BASE_URL: env.sim.baseUrl,
        GATEWAY_API_KEY: env.sim.apiKey,
      },
    });
    const bad = env.sim.stats().jobsWithBadAnswers.error5xx ?? [];
    expect(bad.length).toBeGreaterThan(0);
    expect(run.code, run.stderr).toBe(3); // the rows whose jobs kept answering 500 failed at their deadline

    const shown = stderr;
    console.log(
      `worker terminal (${bad.length} jobs answering 500):\n${shown.split('\n').slice(0, 8).join('\n')}`,
    );
    // One line per failed status check, naming the row, what failed and what happens next.
    expect(shown).toMatch(/row r\d+: status check failed: .*500.*\(attempt \d+, retrying/);
    expect(shown).not.toContain('taskToken');
    expect(shown).not.toMatch(/^\s+at /m); // no stack frames
    expect(shown).not.toContain('ApplicationFailure');
    expect(shown).not.toContain('No workflows registered');
    const pointer = /full details of every event: (\.vidbatch\/logs\/worker-[^)]+\.log)/.exec(shown);
    expect(pointer, shown).not.toBeNull();

    const logs = await readdir(join(workDir, '.vidbatch', 'logs'));
    expect(logs.some((f) => pointer![1]!.endsWith(f))).toBe(true);
    const file = await readFile(join(workDir, pointer![1]!), 'utf8');
    expect(file).toContain('Activity failed');
    expect(file).toContain('taskToken');
    expect(file).toMatch(/^\s+at /m);
    expect(file).toContain('No workflows registered');
    expect(file).not.toContain(env.sim.apiKey); // the key stays out of the file too
  });
});
