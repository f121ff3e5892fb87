// `npm run build` (and `prepack`): the installed package's dist/, run by bin/vidbatch.mjs without TypeScript.
//
//   dist/cli.js, dist/index.js   the CLI and the library (src/cli/main.ts, src/index.ts), bundled by esbuild;
//   dist/chunk-*.js              code they share, and what commands load with `await import()` (splitting keeps
//                                 those imports lazy); node_modules stay imports (`packages: 'external'`)
//   dist/workflow-bundle.js      the workflows, bundled for the worker with bundleWorkflowCode (+ .json: the SDK
//                                 version it holds)
//   dist/workflows.js            the workflows as one module, for a worker whose SDK is another version: it
//                                 bundles them itself (src/worker/workflow-bundle.ts)
//   dist/clips/, dist/page-*     files the code reads next to itself (see ASSETS)
//   dist/types/                  declarations of the library (tsconfig.build.json)
//
// Every .js file lands in dist/ itself, never in a subfolder: code that finds a file with
// `import.meta.url` (the clips, the review page's script) then finds it where ASSETS puts it, whichever chunk
// that code ended up in. The build checks this.
import { execFileSync } from 'node:child_process';
import { cp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'dist');
const src = (path: string) => join(ROOT, 'src', path);

/**
 * Files read from disk at run time, relative to the module that reads them (`src/<dir>/<file>.ts` reads
 * `<name>` next to itself) and so relative to dist/ once bundled. A new one belongs here too.
 */
const ASSETS: { from: string; to: string }[] = [
  { from: src('simulator/clips'), to: 'clips' }, // simulator/test-clips.ts
  { from: src('review/page-cards.js'), to: 'page-cards.js' }, // review/page.ts
  { from: src('review/page-script.js'), to: 'page-script.js' },
  { from: src('review/page-style.css'), to: 'page-style.css' },
];

/**
 * `@temporalio/common/lib/time`: a file of a package without `exports`, named without its extension, which
 * Node's ESM resolution does not add. Kept external (a dependency), with the extension.
 */
const deepImportExtensions: Plugin = {
  name: 'deep-import-extensions',
  setup(b) {
    b.onResolve({ filter: /^(@[^/.][^/]*\/)?[^/.@][^/]*\/[^.]+$/ }, ({ path, resolveDir }) => {
      const name = path
        .split('/')
        .slice(0, path.startsWith('@') ? 2 : 1)
        .join('/');
      let file: string;
      try {
        file = createRequire(join(resolveDir, 'x.js')).resolve(path).split(sep).join('/');
      } catch {
        return undefined;
      }
      const root = file.slice(0, file.lastIndexOf(`/node_modules/${name}/`) + `/node_modules/${name}`.length);
      const ext = extname(file);
      // Only a subpath naming a file itself: an `exports` map (csv-parse/sync) is Node's to resolve.
      return file === `${root}${path.slice(name.length)}${ext}`
        ? { path: `${path}${ext}`, external: true }
        : undefined;
    });
  },
};

const started = Date.now();
const step = (what: string) => console.log(`${what} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
await rm(DIST, { recursive: true, force: true });

// 1. The CLI and the library.
const { metafile } = await build({
  entryPoints: { cli: src('cli/main.ts'), index: src('index.ts') },
  absWorkingDir: ROOT, // the metafile's paths are relative to it
  outdir: DIST,
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  splitting: true,
  packages: 'external',
  chunkNames: 'chunk-[hash]',
  metafile: true,
  plugins: [deepImportExtensions],
  logLevel: 'warning',
});
const outputs = Object.keys(metafile.outputs).map((file) => relative(DIST, join(ROOT, file)));
const nested = outputs.filter((file) => dirname(file) !== '.');
if (nested.length)
  throw new Error(`build: outputs outside dist/ itself break the asset paths: ${nested.join(', ')}`);
step(`dist/: cli.js, index.js and ${outputs.length - 2} chunks`);

// 2. Files read at run time.
for (const { from, to } of ASSETS) await cp(from, join(DIST, to), { recursive: true });
step(`dist/: ${ASSETS.length} assets`);

// 3. The workflow bundle: the installed package's worker loads it as it is (src/worker/workflow-bundle.ts).
const { bundleWorkflowCode } = await import('@temporalio/worker');
const { code } = await bundleWorkflowCode({
  workflowsPath: src('workflows/index.ts'),
  logger: { info() {}, warn: console.warn, error: console.error, debug() {}, trace() {}, log() {} },
});
await writeFile(join(DIST, 'workflow-bundle.js'), code);
const sdk = (createRequire(import.meta.url)('@temporalio/workflow/package.json') as { version: string })
  .version;
await writeFile(join(DIST, 'workflow-bundle.json'), `${JSON.stringify({ sdkVersion: sdk })}\n`);
step(`dist/workflow-bundle.js (${Math.round(code.length / 1024)} kB, @temporalio/workflow ${sdk})`);
await build({
  entryPoints: { workflows: src('workflows/index.ts') },
  absWorkingDir: ROOT,
  outdir: DIST,
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  packages: 'external',
  plugins: [deepImportExtensions],
  logLevel: 'warning',
});
step('dist/workflows.js');

// 4. Declarations of the library. tsc writes the sources' extensionless imports as they are, which Node16 /
// NodeNext resolution (ESM) does not resolve: each relative specifier gets the file it names.
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });
const TYPES = join(DIST, 'types');
const declarations = (await readdir(TYPES, { recursive: true })).filter((f) => f.endsWith('.d.ts'));
const files = new Set(declarations.map((f) => join(TYPES, f)));
for (const file of files) {
  const text = await readFile(file, 'utf8');
  const fixed = text.replace(
    /((?:from|import)\s*\(?\s*['"])(\.\.?\/[^'"]*)(['"])/g,
    (whole, head: string, spec: string, tail: string) => {
      if (/\.(js|json)$/.test(spec)) return whole;
      const base = join(dirname(file), spec);
      if (files.has(`${base}.d.ts`)) return `${head}${spec}.js${tail}`;
      if (files.has(join(base, 'index.d.ts'))) return `${head}${spec}/index.js${tail}`;
      throw new Error(`build: ${relative(ROOT, file)} imports ${spec}, which has no declaration`);
    },
  );
  if (fixed !== text) await writeFile(file, fixed);
}
step(`dist/types/: ${files.size} declarations`);
