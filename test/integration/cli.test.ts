import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readManifest } from '../../src/results/manifest';
import { writeVbenchCsv } from '../../bench/vbench';
import { background, CLI, vidbatch as runVidbatch } from './cli-helpers';

/** Runs the real `vidbatch` command in `cwd`, without any Temporal or gateway settings from this process. */
const vidbatch = (args: string[], cwd: string, options: { interruptWhen?: RegExp } = {}) =>
  runVidbatch(args, { cwd, ...options });

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

describe('vidbatch validate: bad input told plainly', () => {
  it('a non-UTF-8 file, a binary file, an empty prompt and a `text` header, each with where and why', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-cli-'));
    await writeFile(join(dir, 'latin1.csv'), Buffer.from('prompt\na cat\nun caf\xe9\n', 'latin1'));
    const latin1 = await vidbatch(['validate', 'latin1.csv'], dir);
    expect(latin1.code).toBe(2);
    expect(latin1.stderr).toContain(
      'latin1.csv:3 [(encoding)] not UTF-8 text: byte 0xE9 at byte offset 19 is not valid UTF-8',
    );

    await writeFile(
      join(dir, 'movie.csv'),
      Buffer.from([0, 0, 0, 0x18, 0x66, 0x74, 0x79, 0x70, 0x6d, 0x70, 0x34, 0x32]),
    );
    const binary = await vidbatch(['validate', 'movie.csv'], dir);
    expect(binary.code).toBe(2);
    expect(binary.stderr).toContain('movie.csv:1 [(encoding)] not a text file');
    expect(binary.stderr).not.toContain('unknown column');

    await writeFile(join(dir, 'header.csv'), 'id,text\n1,a cat\n');
    const header = await vidbatch(['validate', 'header.csv'], dir);
    expect(header.code).toBe(2);
    expect(header.stderr).toContain('header.csv:1 [text] unknown column: did you mean `prompt`?');

    await writeFile(join(dir, 'empty.csv'), 'id,prompt\n1,a cat\n2,\n');
    const empty = await vidbatch(['validate', 'empty.csv'], dir);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('empty.csv:3 [prompt] prompt is empty');

    const run = await vidbatch(['run', 'movie.csv', '--simulate'], dir);
    expect(run.code).toBe(2);
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
    expect(interrupted.stderr).toMatch(/Started batch batch-[0-9a-f]{16}-[0-9a-f]{8}/);
    expect(interrupted.stderr).toContain('The batch is durable');
    expect(interrupted.code).toBe(130);
    // Workers read the rows a page at a time from the rows file `run` wrote (docs/input-and-output.md).
    const [rowsFile, ...others] = await readdir(join(dir, 'out', '.rows'));
    expect(others).toEqual([]);
    expect(rowsFile).toMatch(/^[0-9a-f]{32}-plain\.jsonl$/);
    const rowLines = (await readFile(join(dir, 'out', '.rows', rowsFile!), 'utf8')).trimEnd().split('\n');
    expect(rowLines).toHaveLength(51);
    expect(JSON.parse(rowLines[0]!)).toMatchObject({ vidbatchRows: 1, rows: 50 });
    const last = JSON.parse(rowLines[50]!) as { id: string; request: string };
    expect(last.id).toBe('vb-50');
    expect(last.request).toMatch(/^[0-9a-f]{24}\/1$/);

    const resumed = await vidbatch(['run', 'prompts.csv', ...flags], dir);
    expect(resumed.stderr).toMatch(/Attached to batch/);
    expect(resumed.code).toBe(0);
    const batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8}): 50 succeeded, 0 failed of 50/.exec(
      resumed.stdout,
    )?.[1];
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
    expect(status.code, `${status.stderr}${status.stdout}`).toBe(0);
    expect(status.stdout).toContain(`${batchId}: COMPLETED`);
    expect(status.stdout).toContain('50 succeeded, 0 failed of 50');
  }, 300_000); // three runs of the command, each starting an embedded dev server: slow on a loaded machine
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

  it('simulator never prints a key from GATEWAY_API_KEY, and takes the hostile-gateway flags', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-cli-'));
    const sim = background(
      [
        'simulator',
        '--port',
        '0',
        '--idempotency',
        '--job-ttl',
        '30',
        '--hold-for',
        '60',
        '--retry-after-min',
        '7',
        '--fault-reset-before',
        '0.1',
        '--fault-429',
        '0.2',
        '--fault-502-after',
        '0.3',
        '--fault-504-after',
        '0.4',
        '--fault-scope',
        'submit',
      ],
      { cwd: dir, env: { GATEWAY_API_KEY: 'sk-real-secret' } },
    );
    const [, baseUrl, key] = await sim.waitFor(/GATEWAY_BASE_URL=(\S+\/v1)\n.*GATEWAY_API_KEY=(\S+)/);
    await sim.waitFor(/Idempotency-Key honoured/);
    expect(key).toMatch(/^sk-/);
    expect(key).not.toBe('sk-real-secret');
    for (const endpoint of ['keys', 'stats', 'faults', 'options', 'hold', 'outage', 'jobs'])
      expect(sim.output()).toContain(endpoint);
    const admin = baseUrl!.replace(/\/v1$/, '/admin');
    const get = async (path: string) =>
      (await fetch(`${admin}/${path}`)).json() as Promise<Record<string, unknown>>;
    expect(await get('options')).toMatchObject({ idempotency: true, jobTtlSeconds: 30 });
    expect(await get('faults')).toMatchObject({
      scope: 'submit',
      retryAfterMinSeconds: 7,
      resetBefore: 0.1,
      error429: 0.2,
      error502After: 0.3,
      error504After: 0.4,
    });
    // --hold-for 60: every /v1 request is held with 429 and a Retry-After.
    const held = await fetch(`${baseUrl}/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(held.status).toBe(429);
    expect(Number(held.headers.get('retry-after'))).toBeGreaterThan(50);
    // The real key was not registered either.
    const keys = JSON.stringify(await get('keys'));
    const stopped = await sim.stop();
    expect(stopped.code).toBe(0);
    expect(stopped.stdout + stopped.stderr + keys).not.toContain('sk-real-secret');
  });
});
