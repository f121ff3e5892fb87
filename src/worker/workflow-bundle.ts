// Workers load a prebuilt workflow bundle instead of running webpack as they start: bundling takes seconds
// and about 100 MB of memory that the worker process would keep for its whole life. The installed package
// ships one (dist/workflow-bundle.js, made by `npm run build`); in a development checkout the bundle is built
// once per version of the code, in a child process, and cached under `<cache>/workflow-bundles/<hash>.js`.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultCacheDir } from '../dev-server/cli-binary';

const SRC_DIR = fileURLToPath(new URL('..', import.meta.url));
const THIS_FILE = fileURLToPath(import.meta.url);
/**
 * Run from the built package: this code is JavaScript in dist/ (in a chunk of esbuild's), next to the bundle
 * the build made; from the sources (tsx, vitest) it is this .ts file.
 */
const BUILT = !THIS_FILE.endsWith('.ts');
const PREBUILT = join(dirname(THIS_FILE), 'workflow-bundle.js');

/** Hash of everything that can change the bundle: vidbatch's sources and the workflow SDK's version. */
async function codeHash(): Promise<string> {
  const hash = createHash('sha256');
  const files = (await readdir(SRC_DIR, { recursive: true })).filter((f) => f.endsWith('.ts')).sort();
  for (const file of files) hash.update(file).update(await readFile(join(SRC_DIR, file)));
  hash.update(sdkVersion());
  return hash.digest('hex').slice(0, 16);
}

/**
 * The path of a bundle of `workflowsPath`: in the built package, the one it ships (its workflows are the
 * package's own); else the cached one, built (in a child process, through tsx) when the cache has none for
 * this code.
 */
export async function cachedWorkflowBundle(
  workflowsPath: string,
  cacheRoot: string = defaultCacheDir(),
): Promise<{ codePath: string }> {
  if (BUILT) return prebuiltBundle();
  const codePath = join(cacheRoot, 'workflow-bundles', `${await codeHash()}.js`);
  if (!existsSync(codePath)) await buildInChild(workflowsPath, codePath);
  return { codePath };
}

async function prebuiltBundle(): Promise<{ codePath: string }> {
  if (!existsSync(PREBUILT)) throw new Error(`${PREBUILT} is missing: reinstall vidbatch`);
  // The bundle holds the workflow SDK it was built with; the worker is the installed one.
  const built = JSON.parse(await readFile(PREBUILT.replace(/\.js$/, '.json'), 'utf8').catch(() => '{}')) as {
    sdkVersion?: string;
  };
  const installed = sdkVersion();
  if (built.sdkVersion && built.sdkVersion !== installed)
    console.warn(
      `vidbatch: the workflow bundle was built with @temporalio/workflow ${built.sdkVersion}, this worker runs ${installed}`,
    );
  return { codePath: PREBUILT };
}

const sdkVersion = () =>
  (createRequire(import.meta.url)('@temporalio/workflow/package.json') as { version: string }).version;

function buildInChild(workflowsPath: string, codePath: string): Promise<void> {
  const child = spawn(
    process.execPath,
    ['--import', import.meta.resolve('tsx/esm'), THIS_FILE, workflowsPath, codePath],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`building the workflow bundle failed (exit ${code}):\n${stderr.slice(-2000)}`)),
    );
  });
}

async function build(workflowsPath: string, codePath: string): Promise<void> {
  const { bundleWorkflowCode } = await import('@temporalio/worker');
  const { code } = await bundleWorkflowCode({ workflowsPath });
  await mkdir(dirname(codePath), { recursive: true });
  // Written aside and renamed, so a concurrent worker never loads half a bundle.
  const staging = `${codePath}.${process.pid}.tmp`;
  await writeFile(staging, code);
  await rename(staging, codePath);
}

// Only from the sources: built, this code shares a file with others (esbuild's chunks), and `node dist/cli.js`
// could be that file.
if (!BUILT && process.argv[1] === THIS_FILE) {
  const [workflowsPath, codePath] = process.argv.slice(2);
  await build(workflowsPath!, codePath!);
}
