// The package a user installs: `npm pack` (whose prepack runs the build), `npm install` of the tarball into an
// empty folder, then the installed `vidbatch` runs a batch against this test's Temporal server with the
// simulator: the built CLI, the prebuilt workflow bundle and the clips, with no TypeScript loader (no tsx in the
// installed tree) and nothing of the repository's tests in the tarball; with another workflow SDK than the
// bundle's, the worker bundles the shipped workflows itself. Needs the npm registry (the tarball's
// dependencies): under CI=true it always runs; elsewhere it is skipped, saying so, when npm cannot reach it.
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { cliEnvironment } from './cli-helpers';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const NPX = process.platform === 'win32' ? 'npx.cmd' : 'npx';
const run = promisify(execFile);

/** This process's environment without what `npm test` sets for its own package, which would mislead npm. */
function npmEnvironment(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = cliEnvironment(extra);
  for (const name of Object.keys(env))
    if (/^npm_(package|lifecycle)_|^npm_config_(local_prefix|prefix|global)$/i.test(name)) delete env[name];
  return env;
}

async function registryReachable(): Promise<boolean> {
  try {
    await run(NPM, ['ping', '--fetch-retries=0', '--fetch-timeout=10000'], {
      env: npmEnvironment(),
      timeout: 20_000,
    });
    return true;
  } catch {
    return false;
  }
}

const IN_CI = process.env.CI === 'true';
const reachable = IN_CI || (await registryReachable());
if (!reachable)
  console.warn(
    'package-install.test.ts skipped: npm cannot reach the registry (npm ping failed); CI=true runs it',
  );

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(!reachable)('the installed package (npm pack, npm install of the tarball)', () => {
  it('runs a simulated batch with the built CLI and no tsx, from a tarball with no tests', async () => {
    const packDir = await mkdtemp(join(tmpdir(), 'vidbatch-pack-'));
    const app = await mkdtemp(join(tmpdir(), 'vidbatch-app-'));
    dirs.push(packDir, app);

    // npm pack runs prepack: the build.
    await run(NPM, ['pack', '--pack-destination', packDir], {
      cwd: ROOT,
      env: npmEnvironment(),
      maxBuffer: 64 * 1024 * 1024,
      timeout: 300_000,
    });
    const [tarball] = (await readdir(packDir)).filter((f) => /^vidbatch-.*\.tgz$/.test(f));
    expect(tarball).toBeDefined();
    const { stdout: listing } = await run('tar', ['-tzf', join(packDir, tarball!)], { maxBuffer: 16 << 20 });
    const files = listing.split('\n').filter(Boolean);
    expect(files).toContain('package/dist/cli.js');
    expect(files).toContain('package/dist/workflow-bundle.js');
    expect(files).toContain('package/dist/clips/720P-5s.mp4');
    expect(files.filter((f) => /^package\/(test|src|bench|scripts)\//.test(f))).toEqual([]);

    await writeFile(join(app, 'package.json'), '{ "name": "app", "private": true }\n');
    await run(NPM, ['install', '--no-audit', '--no-fund', '--prefer-offline', join(packDir, tarball!)], {
      cwd: app,
      env: npmEnvironment(),
      maxBuffer: 64 * 1024 * 1024,
      timeout: 300_000,
    });
    const { stdout: tree } = await run(NPM, ['ls', '--all', '--parseable'], {
      cwd: app,
      env: npmEnvironment(),
      maxBuffer: 64 * 1024 * 1024,
    }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' })); // exit 1 on peer-dependency notes
    expect(tree).toContain(join('node_modules', 'vidbatch'));
    expect(tree.split('\n').filter((p) => /[/\\]node_modules[/\\]tsx$/.test(p))).toEqual([]);
    expect(existsSync(join(app, 'node_modules', 'vidbatch', 'src'))).toBe(false);

    // The library: `import ... from 'vidbatch'` (package.json exports), with its declarations.
    const { stdout: api } = await run(
      process.execPath,
      ['--input-type=module', '-e', "console.log(Object.keys(await import('vidbatch')).join(' '))"],
      { cwd: app },
    );
    expect(api.trim().split(' ')).toEqual(
      expect.arrayContaining([
        'openSession',
        'startBatch',
        'startAndFollow',
        'retryFailed',
        'loadCsv',
        'runWorker',
      ]),
    );
    expect(existsSync(join(app, 'node_modules', 'vidbatch', 'dist', 'types', 'index.d.ts'))).toBe(true);

    await writeFile(join(app, 'x.csv'), 'id,prompt\nr1,a red ball\nr2,a blue cube\nr3,a green cone\n');
    const settings = {
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      VIDBATCH_TASK_QUEUE: `package-install-${process.pid}-${Date.now()}`,
    };
    const flags = ['--sim-job-seconds', '1', '--first-poll', '0.5', '--poll-interval', '0.3'];
    const prebuiltCache = join(app, 'cache-prebuilt');
    const result = await npx(['run', 'x.csv', '--simulate', ...flags, '--download', 'videos'], app, {
      ...settings,
      XDG_CACHE_HOME: prebuiltCache,
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/Started batch batch-[0-9a-f]{16}-[0-9a-f]{8}/);
    const batchId = /(batch-[0-9a-f]{16}-[0-9a-f]{8}): 3 succeeded, 0 failed of 3/.exec(result.stdout)?.[1];
    expect(batchId, result.stdout).toBeDefined();
    const manifest = (await readFile(join(app, 'out', batchId!, 'manifest.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { status: string });
    expect(manifest.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    for (const id of ['r1', 'r2', 'r3'])
      expect(existsSync(join(app, 'videos', batchId!, `${id}.mp4`)), `${id}.mp4`).toBe(true);
    // The worker used the shipped bundle: it built none.
    expect(existsSync(join(prebuiltCache, 'vidbatch', 'workflow-bundles'))).toBe(false);

    // A workflow SDK other than the bundle's (a newer one within the dependency range): the worker bundles
    // dist/workflows.js itself, once, into its cache, with no TypeScript loader either.
    const installed = join(app, 'node_modules', 'vidbatch', 'dist');
    await writeFile(join(installed, 'workflow-bundle.json'), '{ "sdkVersion": "0.0.0-another" }\n');
    await writeFile(join(app, 'y.csv'), 'id,prompt\nr1,a yellow star\n');
    const cache = join(app, 'cache');
    const other = await npx(['run', 'y.csv', '--simulate', ...flags], app, {
      ...settings,
      XDG_CACHE_HOME: cache,
    });
    expect(other.code, other.stderr).toBe(0);
    expect(other.stdout).toMatch(/batch-[0-9a-f]{16}-[0-9a-f]{8}: 1 succeeded, 0 failed of 1/);
    expect(
      (await readdir(join(cache, 'vidbatch', 'workflow-bundles'))).filter((f) => f.endsWith('.js')),
    ).toHaveLength(1);

    // The review page's script and style, read from dist/ next to the code.
    const review = await npx(['review', batchId!], app, settings);
    expect(review.code, review.stderr).toBe(0);
    const page = await readFile(join(app, 'out', batchId!, 'review.html'), 'utf8');
    expect(page).toContain('<style>');
    expect(page.length).toBeGreaterThan(10_000);
  }, 600_000); // a build, an npm install of the tarball's dependencies (from the npm cache when it can)
});

function npx(
  args: string[],
  cwd: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(NPX, ['--no', 'vidbatch', ...args], {
    cwd,
    env: npmEnvironment(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
