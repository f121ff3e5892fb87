#!/usr/bin/env node
// The `vidbatch` command. In a development checkout (src/ is here) it runs the TypeScript sources through tsx,
// so `npx vidbatch` works right after `npm ci` and never runs a stale build; the installed package has no
// src/, and runs the JavaScript `npm run build` made (dist/), with no TypeScript loader.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';

if (existsSync(join(import.meta.dirname, '..', 'src', 'cli', 'main.ts'))) {
  const tsx = await import('tsx/esm/api').catch((err) => {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err;
    // A checkout installed without its dev dependencies (npm ci --omit=dev).
    process.stderr.write(
      'vidbatch: running the sources needs tsx, a dev dependency: run `npm ci` (with dev dependencies)\n',
    );
    process.exit(1);
  });
  tsx.register();
  await import('../src/cli/main.ts');
} else {
  await import('../dist/cli.js');
}
