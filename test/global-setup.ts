// Starts one real Temporal dev server for the whole test run (provisioning the CLI first if needed).
import type { TestProject } from 'vitest/node';
import { startDevServer, type DevServer } from '../src/dev-server/dev-server';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    temporalUiUrl: string;
  }
}

let server: DevServer | undefined;

export async function setup(project: TestProject): Promise<void> {
  const started = Date.now();
  server = await startDevServer({ dbFile: ':memory:', log: (m) => console.log(`[global-setup] ${m}`) });
  console.log(`[global-setup] dev server up in ${Date.now() - started} ms (CLI: ${server.cliPath})`);
  project.provide('temporalAddress', server.address);
  project.provide('temporalUiUrl', server.uiUrl ?? '');
}

export async function teardown(): Promise<void> {
  await server?.stop();
}
