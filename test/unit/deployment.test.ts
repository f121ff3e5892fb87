// docker-compose.yml and the Dockerfile agree with the code: valid compose, real CLI commands and flags,
// environment variables the code reads, the search attributes the code defines.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { SEARCH_ATTRIBUTES } from '../../src/contract/search-attributes';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = fileURLToPath(new URL('../../bin/vidbatch.mjs', import.meta.url));

interface Service {
  command?: string[] | string;
  entrypoint?: string[];
  environment?: Record<string, string>;
  image?: string;
  build?: unknown;
}

async function compose(): Promise<{ services: Record<string, Service> }> {
  return parse(await readFile(`${ROOT}/docker-compose.yml`, 'utf8')) as { services: Record<string, Service> };
}

async function sourceText(): Promise<string> {
  const { stdout } = await run('git', ['ls-files', 'src'], { cwd: ROOT });
  const files = stdout.split('\n').filter((f) => f.endsWith('.ts'));
  return (await Promise.all(files.map((f) => readFile(`${ROOT}/${f}`, 'utf8')))).join('\n');
}

describe('deployment files', () => {
  it('docker-compose.yml is valid for docker-compose (schema, anchors, profiles)', async () => {
    const available = await run('docker-compose', ['version']).then(
      () => true,
      () => false,
    );
    // CI installs docker-compose (.ci/run); elsewhere the YAML checks below still run.
    if (process.env.CI) expect(available, 'docker-compose must be installed in CI').toBe(true);
    if (available) {
      await run(
        'docker-compose',
        ['-f', 'docker-compose.yml', '--profile', 'simulator', '--profile', 'cli', 'config', '-q'],
        { cwd: ROOT },
      );
    }
    const { services } = await compose();
    expect(Object.keys(services)).toEqual(
      expect.arrayContaining([
        'postgresql',
        'temporal',
        'temporal-setup',
        'temporal-ui',
        'worker',
        'simulator',
        'starter',
      ]),
    );
  });

  it('uses real vidbatch commands and flags', async () => {
    const { services } = await compose();
    for (const name of ['worker', 'simulator']) {
      const [command, ...args] = services[name]!.command as string[];
      const { stdout } = await run(process.execPath, [CLI, command!, '--help']);
      for (const flag of args.filter((a) => a.startsWith('--')))
        expect(stdout, `${name}: ${flag}`).toContain(flag);
    }
    expect(services.starter!.entrypoint).toEqual(['node', 'bin/vidbatch.mjs']);
    const dockerfile = await readFile(`${ROOT}/Dockerfile`, 'utf8');
    expect(dockerfile).toContain('ENTRYPOINT ["node", "bin/vidbatch.mjs"]');
    expect(dockerfile).toMatch(/COPY bin/);
    expect(dockerfile).toMatch(/COPY src/);
  });

  it('sets only environment variables the code reads', async () => {
    const { services } = await compose();
    const source = await sourceText();
    const temporalOwn = ['TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE']; // read by @temporalio/envconfig
    for (const name of ['worker', 'starter']) {
      for (const variable of Object.keys(services[name]!.environment ?? {})) {
        if (temporalOwn.includes(variable)) continue;
        expect(source, `${name}: ${variable}`).toContain(variable);
      }
    }
    expect(services.worker!.environment).toMatchObject({
      TEMPORAL_ADDRESS: 'temporal:7233',
      VIDBATCH_TASK_QUEUE: 'vidbatch',
    });
  });

  it('registers exactly the search attributes the code defines', async () => {
    const { services } = await compose();
    const script = (services['temporal-setup']!.command as string[]).join(' ');
    const registered = [...script.matchAll(/--name (\w+) --type (\w+)/g)].map((m) => ({
      name: m[1],
      type: m[2],
    }));
    expect(registered).toEqual(SEARCH_ATTRIBUTES.map(({ name, type }) => ({ name, type })));
  });
});
