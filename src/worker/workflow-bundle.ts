// Workers load a prebuilt workflow bundle instead of running webpack as they start: bundling takes seconds
// and about 100 MB of memory that the worker process would keep for its whole life. The installed package
// ships one (dist/workflow-bundle.js, made by `npm run build`). Otherwise (a development checkout, or an
// installed package whose workflow SDK is not the one its bundle holds) the bundle is built once per version
// of the code, in a child process, and cached under `<cache>/workflow-bundles/<hash>.js`.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultCacheDir } from '../dev-server/cli-binary';

const THIS_FILE = fileURLToPath(import.meta.url);
/**
 * Run from the built package: this code is JavaScript in dist/ (in a chunk of esbuild's), next to what the
 * build made; from the sources (tsx, vitest) it is this .ts file.
 */
const BUILT = !THIS_FILE.endsWith('.ts');
const DIST_DIR = dirname(THIS_FILE);
/** Built: the bundle, the SDK version it holds (workflow-bundle.json) and the workflows it was made from. */
const PREBUILT = join(DIST_DIR, 'workflow-bundle.js');
const PREBUILT_INFO = join(DIST_DIR, 'workflow-bundle.json');
const BUILT_WORKFLOWS = join(DIST_DIR, 'workflows.js');
const SRC_DIR = fileURLToPath(new URL('..', import.meta.url));

const sdkVersion = () =>
  (createRequire(import.meta.url)('@temporalio/workflow/package.json') as { version: string }).version;

/** Hash of everything that can change the bundle: vidbatch's code and the workflow SDK's version. */
async function codeHash(): Promise<string> {
  const hash = createHash('sha256');
  if (BUILT) hash.update(await readFile(BUILT_WORKFLOWS));
  else {
    const files = (await readdir(SRC_DIR, { recursive: true })).filter((f) => f.endsWith('.ts')).sort();
    for (const file of files) hash.update(file).update(await readFile(join(SRC_DIR, file)));
  }
  hash.update(sdkVersion());
  return hash.digest('hex').slice(0, 16);
}

/**
 * The path of a bundle of `workflowsPath`: in the built package, the one it ships, made from the package's
 * own workflows (`workflowsPath` is not used), when it holds the installed workflow SDK (the worker and the
 * workflow code must be one version of the SDK); else the cached one, built (in a child process) when the
 * cache has none for this code.
 */
export async function cachedWorkflowBundle(
  workflowsPath: string,
  cacheRoot: string = defaultCacheDir(),
): Promise<{ codePath: string }> {
  if (BUILT) {
    const built = JSON.parse(await readFile(PREBUILT_INFO, 'utf8').catch(() => '{}')) as {
      sdkVersion?: string;
    };
    if (built.sdkVersion === sdkVersion() && existsSync(PREBUILT)) return { codePath: PREBUILT };
    workflowsPath = BUILT_WORKFLOWS;
  }
  const codePath = join(cacheRoot, 'workflow-bundles', `${await codeHash()}.js`);
  if (!existsSync(codePath)) await buildInChild(workflowsPath, codePath);
  return { codePath };
}

/**
 * What the child runs (`node -e`, so it needs no file of its own nor a TypeScript loader: bundleWorkflowCode
 * compiles TypeScript workflows itself). Written aside and renamed, so a concurrent worker never loads half a
 * bundle.
 */
const CHILD = `
const [workflowsPath, codePath] = process.argv.slice(1);
const { bundleWorkflowCode } = await import(${JSON.stringify(import.meta.resolve('@temporalio/worker'))});
const { mkdir, rename, writeFile } = await import('node:fs/promises');
const { dirname } = await import('node:path');
const { code } = await bundleWorkflowCode({ workflowsPath });
await mkdir(dirname(codePath), { recursive: true });
const staging = codePath + '.' + process.pid + '.tmp';
await writeFile(staging, code);
await rename(staging, codePath);
`;

function buildInChild(workflowsPath: string, codePath: string): Promise<void> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', CHILD, workflowsPath, codePath], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
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
