#!/usr/bin/env node
// The `vidbatch` command. In a development checkout (src/ is here) it runs the TypeScript sources through tsx,
// so `npx vidbatch` works right after `npm ci` and never runs a stale build; the installed package has no
// src/, and runs the JavaScript `npm run build` made (dist/), with no TypeScript loader.
import { existsSync } from 'node:fs';
import { join } from 'node:path';

if (existsSync(join(import.meta.dirname, '..', 'src', 'cli', 'main.ts'))) {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
} else {
  await import('../dist/cli.js');
}
