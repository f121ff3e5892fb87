import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { readManifest } from '../../src/results/manifest';
import { writeVbenchCsv } from '../../bench/vbench';

const CLI = fileURLToPath(new URL('../../bin/vidbatch.mjs', import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real `vidbatch` command in `cwd`, without any Temporal or gateway settings from this process. */
function vidbatch(args: string[], cwd: string, options: { interruptWhen?: RegExp } = {}): Promise<Run> {
  const env = { ...process.env };
  for (const name of ['TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE', 'GATEWAY_BASE_URL', 'GATEWAY_API_KEY'])
    delete env[name];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let interrupted = false;
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (options.interruptWhen && !interrupted && options.interruptWhen.test(stderr)) {
        interrupted = true;
        child.kill('SIGINT');
      }
    });
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('vidbatch validate', () => {
  it('exits 0 for a good file and 2 with every problem for a bad one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-cli-'));
    await writeVbenchCsv(join(dir, 'good.csv'), 10);
    const good = await vidbatch(['validate', 'good.csv'], dir);
    expect(good.code).toBe(0);
    expect(good.stdout).toContain('10 rows, no problems');

    await writeFile(join(dir, 'bad.csv'), 'id,prompt,duration\n1,ok,5\n2,,5\n1,dup,x\n');
    const bad = await vidbatch(['validate', 'bad.csv'], dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('bad.csv:3 [prompt]');
    expect(bad.stderr).toContain('bad.csv:4 [duration]');
    const json = await vidbatch(['validate', 'bad.csv', '--json'], dir);
    expect((JSON.parse(json.stdout) as { problems: unknown[] }).problems).toHaveLength(2);
  });

  it('run refuses a file with errors before starting anything', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-cli-'));
    await writeFile(join(dir, 'bad.csv'), 'prompt,model\n,x\n');
    const run = await vidbatch(['run', 'bad.csv', '--simulate'], dir);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/bad\.csv:2 \[prompt\]/);
    expect(existsSync(join(dir, '.vidbatch'))).toBe(false);
  });
});

describe('vidbatch run --simulate (embedded dev server, in-process worker)', () => {
  it('survives Ctrl-C, continues on the next run, and records 50 URLs without paying twice', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-cli-'));
    await writeVbenchCsv(join(dir, 'prompts.csv'), 50);
    const flags = [
      '--simulate',
      '--sim-job-seconds',
      '2',
      '--first-poll',
      '1.5',
      '--poll-interval',
      '0.5',
      '--concurrency',
      '10',
    ];

    const interrupted = await vidbatch(['run', 'prompts.csv', ...flags], dir, {
      interruptWhen: /[1-9]\d*\/50 done/,
    });
    expect(interrupted.stderr).toMatch(/Started batch batch-[0-9a-f]{16}/);
    expect(interrupted.stderr).toContain('The batch is durable');
    expect(interrupted.code).toBe(130);

    const resumed = await vidbatch(['run', 'prompts.csv', ...flags], dir);
    expect(resumed.stderr).toMatch(/Attached to batch/);
    expect(resumed.code).toBe(0);
    const batchId = /(batch-[0-9a-f]{16}): 50 succeeded, 0 failed of 50/.exec(resumed.stdout)?.[1];
    expect(batchId).toBeDefined();
    const manifest = await readManifest(join(dir, 'out', batchId!, 'manifest.jsonl'));
    expect(manifest).toHaveLength(50);
    expect(manifest.every((r) => r.status === 'succeeded' && /\.mp4/.test(r.url ?? ''))).toBe(true);

    const again = await vidbatch(['run', 'prompts.csv', ...flags, '--json'], dir);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ batchId, succeeded: 50 });
    const simulator = JSON.parse(await readFile(join(dir, '.vidbatch', 'simulator-state.json'), 'utf8')) as {
      jobs: unknown[];
    };
    expect(simulator.jobs).toHaveLength(50); // 3 runs of the command, 50 jobs paid for

    // Operator commands on the embedded server need no gateway settings and start no worker.
    const status = await vidbatch(['status', 'prompts.csv'], dir);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(`${batchId}: COMPLETED`);
    expect(status.stdout).toContain('50 succeeded, 0 failed of 50');
  });
});

/** Starts a long-running vidbatch command, resolves with the first stdout match, and stops it with SIGINT. */
async function foreground(
  args: string[],
  cwd: string,
  pattern: RegExp,
): Promise<{ match: RegExpExecArray; stop: () => Promise<number | null> }> {
  const child = spawn(process.execPath, [CLI, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      const m = pattern.exec(stdout);
      if (m) resolve(m);
    });
    child.on('exit', (code) => reject(new Error(`exited ${code} before printing ${pattern}: ${stdout}`)));
  });
  const stop = () =>
    new Promise<number | null>((resolve) => {
      child.removeAllListeners('exit');
      child.on('exit', (code) => resolve(code));
      child.kill('SIGINT');
    });
  return { match, stop };
}

describe('vidbatch server and simulator', () => {
  it('server prints the gRPC address and a UI URL that serves the Temporal Web UI, and stops on Ctrl-C', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-cli-'));
    const { match, stop } = await foreground(
      ['server', '--db-file', 'srv.db'],
      dir,
      /Temporal Web UI: +(http:\S+)/,
    );
    const page = await fetch(match[1]!);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<html/i);
    expect(await stop()).toBe(0);
    expect(existsSync(join(dir, 'srv.db'))).toBe(true);
  });

  it('simulator prints its base URL and key, and serves the gateway API', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-cli-'));
    const { match, stop } = await foreground(
      ['simulator', '--port', '0', '--api-key', 'sk-cli-test'],
      dir,
      /GATEWAY_BASE_URL=(\S+\/v1)\n.*GATEWAY_API_KEY=(\S+)/,
    );
    expect(match[2]).toBe('sk-cli-test');
    const models = await fetch(`${match[1]}/models`, { headers: { authorization: 'Bearer sk-cli-test' } });
    expect(models.status).toBe(200);
    expect((await fetch(`${match[1]}/models`)).status).toBe(401);
    expect(await stop()).toBe(0);
  });
});
