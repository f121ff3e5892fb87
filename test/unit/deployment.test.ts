// Over 400 lines: the compose file, its deploy/ files and the Dockerfile are checked against each other.
// docker-compose.yml, its deploy/ files and the Dockerfile agree with the code and stay secure by default:
// valid compose (checked by docker-compose itself when installed), real CLI commands and flags, environment
// variables the code reads, the search attributes the code defines, supported Temporal images pinned to the
// server the pinned CLI runs, ports on 127.0.0.1, no default gateway URL or key, graceful healthy workers.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadGatewaySettings, loadWorkerSettings, shutdownForceMs } from '../../src/config';
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
  ports?: string[];
  profiles?: string[];
  secrets?: (string | { source: string })[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  stop_grace_period?: string;
  init?: boolean;
  healthcheck?: { test: string[] };
}

interface ComposeFile {
  services: Record<string, Service>;
  secrets?: Record<string, { file: string }>;
}

const COMPOSE_TEXT = () => readFile(`${ROOT}/docker-compose.yml`, 'utf8');

async function compose(): Promise<ComposeFile> {
  // merge: the file shares environment blocks through YAML merge keys (`<<: *anchor`).
  return parse(await COMPOSE_TEXT(), { merge: true }) as ComposeFile;
}

async function sourceText(): Promise<string> {
  const { stdout } = await run('git', ['ls-files', 'src'], { cwd: ROOT });
  const files = stdout.split('\n').filter((f) => f.endsWith('.ts'));
  return (await Promise.all(files.map((f) => readFile(`${ROOT}/${f}`, 'utf8')))).join('\n');
}

const hasDockerCompose = run('docker-compose', ['version']).then(
  () => true,
  () => false,
);

/** Variables the compose file reads: cleared, so the caller's shell cannot make a check pass. */
const COMPOSE_VARS = [
  'GATEWAY_BASE_URL',
  'GATEWAY_API_KEY_SECRET',
  'POSTGRES_PASSWORD',
  'TEMPORAL_NAMESPACE',
  'TEMPORAL_NAMESPACE_RETENTION',
  'COMPOSE_PROFILES',
  'COMPOSE_FILE',
];

/** Runs docker-compose on the project with exactly `vars` set; `envFile` replaces any local .env. */
async function dockerCompose(
  envFile: string,
  args: string[],
  vars: Record<string, string> = {},
): Promise<{ ok: boolean; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of COMPOSE_VARS) delete env[name];
  try {
    const { stdout, stderr } = await run(
      'docker-compose',
      ['-f', 'docker-compose.yml', '--env-file', envFile, ...args],
      { cwd: ROOT, env: { ...env, ...vars } },
    );
    return { ok: true, stdout, stderr };
  } catch (err) {
    const { stdout = '', stderr = '' } = err as { stdout?: string; stderr?: string };
    return { ok: false, stdout, stderr };
  }
}

function seconds(duration: string): number {
  const match = /^(\d+)(s|m)$/.exec(duration);
  if (!match) throw new Error(`unexpected duration ${duration}`);
  return Number(match[1]) * (match[2] === 'm' ? 60 : 1);
}

/** image "name:tag" -> tag */
function tag(image: string | undefined): string {
  return image?.split(':')[1] ?? '';
}

describe('deployment files', () => {
  it('docker-compose.yml is valid for docker-compose (schema, anchors, profiles)', async () => {
    const available = await hasDockerCompose;
    // CI installs docker-compose (.ci/run); elsewhere the YAML checks below still run.
    if (process.env.CI) expect(available, 'docker-compose must be installed in CI').toBe(true);
    if (available) {
      // The simulator preset needs no gateway settings of the user's, and turns the profile on by itself.
      const sim = await dockerCompose('deploy/simulator.env', ['--profile', 'cli', 'config']);
      expect(sim.ok, sim.stderr).toBe(true);
      const resolved = parse(sim.stdout) as ComposeFile;
      expect(resolved.services.worker!.environment).toMatchObject({
        GATEWAY_BASE_URL: 'http://simulator:8787/v1',
        GATEWAY_API_KEY_FILE: '/run/secrets/gateway_api_key',
      });
      expect(resolved.secrets!.gateway_api_key!.file).toBe(`${ROOT}deploy/simulator-api-key`);
      // docker-compose 1.29 lists every service whatever the profiles, so the profile switch is read here.
      const presetFile = await readFile(`${ROOT}/deploy/simulator.env`, 'utf8');
      expect(presetFile).toMatch(/^COMPOSE_PROFILES=simulator$/m);
    }
    const { services } = await compose();
    expect(Object.keys(services)).toEqual(
      expect.arrayContaining([
        'postgresql',
        'temporal-schema',
        'temporal',
        'temporal-setup',
        'temporal-ui',
        'worker',
        'simulator',
        'starter',
      ]),
    );
  });

  it('a real deployment fails fast naming each missing setting, and binds every port to 127.0.0.1', async () => {
    if (await hasDockerCompose) {
      // An empty env file, so a developer's own .env cannot fill in what a fresh deployment lacks.
      const empty = (await run('mktemp')).stdout.trim();
      const none = await dockerCompose(empty, ['config', '-q']);
      expect(none.ok).toBe(false);
      expect(none.stderr).toContain('POSTGRES_PASSWORD');
      const noUrl = await dockerCompose(empty, ['config', '-q'], { POSTGRES_PASSWORD: 'pw' });
      expect(noUrl.ok).toBe(false);
      expect(noUrl.stderr).toContain('GATEWAY_BASE_URL');
      const real = await dockerCompose(empty, ['--profile', 'simulator', '--profile', 'cli', 'config'], {
        POSTGRES_PASSWORD: 'pw',
        GATEWAY_BASE_URL: 'https://gateway.example.com/v1',
      });
      expect(real.ok, real.stderr).toBe(true);
      const resolved = parse(real.stdout) as ComposeFile;
      expect(resolved.services.worker!.environment!.GATEWAY_BASE_URL).toBe('https://gateway.example.com/v1');
      expect(resolved.secrets!.gateway_api_key!.file).toBe(`${ROOT}deploy/secrets/gateway_api_key`);
      await run('rm', ['-f', empty]);
      const published = Object.values(resolved.services).flatMap((s) => s.ports ?? []);
      expect(published.length).toBeGreaterThan(0);
      for (const port of published) expect(port).toMatch(/^127\.0\.0\.1:/);
    }
    const { services } = await compose();
    for (const [name, service] of Object.entries(services)) {
      for (const port of service.ports ?? []) expect(port, name).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
    }
  });

  it('holds no default gateway URL or key outside the simulator preset', async () => {
    const text = await COMPOSE_TEXT();
    const { services, secrets } = await compose();
    expect(text).not.toMatch(/:-\s*sk-/);
    expect(text).not.toMatch(/GATEWAY_API_KEY:/);
    expect(services.worker!.environment!.GATEWAY_BASE_URL).toMatch(/^\$\{GATEWAY_BASE_URL:\?.+\}$/);
    // The only key in the file is the simulator's own, in its profile, equal to the preset's key file.
    for (const [name, service] of Object.entries(services)) {
      if (JSON.stringify(service).includes('sk-')) expect(name).toBe('simulator');
    }
    expect(services.simulator!.profiles).toEqual(['simulator']);
    const simKey = (services.simulator!.command as string[]).at(
      (services.simulator!.command as string[]).indexOf('--api-key') + 1,
    );
    expect((await readFile(`${ROOT}/deploy/simulator-api-key`, 'utf8')).trim()).toBe(simKey);
    // The key reaches workers as a Docker secret, read through GATEWAY_API_KEY_FILE (src/config.ts).
    const secretNames = (services.worker!.secrets ?? []).map((s) => (typeof s === 'string' ? s : s.source));
    const keyFile = services.worker!.environment!.GATEWAY_API_KEY_FILE!;
    expect(keyFile).toMatch(/^\/run\/secrets\//);
    expect(secretNames).toContain(keyFile.replace('/run/secrets/', ''));
    expect(secrets![keyFile.replace('/run/secrets/', '')]!.file).toBe(
      '${GATEWAY_API_KEY_SECRET:-./deploy/secrets/gateway_api_key}',
    );
    expect(await sourceText()).toContain('GATEWAY_API_KEY_FILE');
    // Real keys stay out of git and out of the image's build context.
    expect(await readFile(`${ROOT}/deploy/secrets/.gitignore`, 'utf8')).toMatch(/^\*$/m);
    const dockerignore = (await readFile(`${ROOT}/.dockerignore`, 'utf8')).split('\n');
    expect(dockerignore).toEqual(expect.arrayContaining(['deploy', 'secrets', '.env']));
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
    // The image runs the build (dist/, made in the first stage from src/), not the sources through tsx.
    expect(dockerfile).toMatch(/COPY src/);
    expect(dockerfile).toMatch(/RUN npm run build/);
    expect(dockerfile).toMatch(/COPY --from=build \/app\/dist \.\/dist/);
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
      VIDBATCH_TASK_QUEUE: 'vidbatch-1',
    });
    // The starter never calls the gateway: it gets no gateway settings at all.
    expect(Object.keys(services.starter!.environment ?? {}).filter((v) => v.startsWith('GATEWAY_'))).toEqual(
      [],
    );
  });

  it('registers exactly the search attributes the code defines, re-runnably', async () => {
    const { services } = await compose();
    const setup = services['temporal-setup']!;
    const registered = setup
      .environment!.SEARCH_ATTRIBUTES!.split(/\s+/)
      .map((pair) => ({ name: pair.split('=')[0], type: pair.split('=')[1] }));
    expect(registered).toEqual(SEARCH_ATTRIBUTES.map(({ name, type }) => ({ name, type })));
    expect(setup.entrypoint).toEqual(['/bin/sh', '/deploy/temporal-namespace.sh']);
    expect(setup.volumes).toContain('./deploy/temporal-namespace.sh:/deploy/temporal-namespace.sh:ro');
    const script = await readFile(`${ROOT}/deploy/temporal-namespace.sh`, 'utf8');
    expect(script).toContain('for pair in $SEARCH_ATTRIBUTES');
    expect(script).toContain('search-attribute create');
    expect(script).toContain('namespace create');
    // Workers start only once the namespace and attributes exist.
    expect(services.worker!.depends_on!['temporal-setup']).toEqual({
      condition: 'service_completed_successfully',
    });
  });

  it('runs supported Temporal images, pinned to the server the pinned CLI embeds', async () => {
    const text = await COMPOSE_TEXT();
    const { services } = await compose();
    expect(text).not.toContain('auto-setup');
    const images = Object.values(services).map((s) => s.image ?? '');
    for (const image of images) {
      expect(image, 'every image has an explicit tag').toMatch(/^[\w./-]+:[\w.-]+$/);
      expect(tag(image)).not.toBe('latest');
    }
    const server = tag(services.temporal!.image);
    expect(services.temporal!.image).toBe(`temporalio/server:${server}`);
    expect(server).toMatch(/^1\.29\.\d+$/);
    for (const name of ['temporal-schema', 'temporal-setup']) {
      expect(services[name]!.image).toMatch(
        new RegExp(`^temporalio/admin-tools:${server.replace(/\./g, '\\.')}(-|$)`),
      );
    }
    expect(services['temporal-ui']!.image).toMatch(/^temporalio\/ui:\d+\.\d+\.\d+$/);
    // Where the pinned CLI's go.mod is at hand (it is wherever the CLI was built with `go install`), the
    // server and UI are exactly the versions it embeds.
    const cliVersion = /TEMPORAL_CLI_VERSION = '(v[\d.]+)'/.exec(await sourceText())?.[1];
    expect(cliVersion).toBeDefined();
    const modCache = process.env.GOMODCACHE ?? `${process.env.HOME}/go/pkg/mod`;
    const goMod = await readFile(`${modCache}/github.com/temporalio/cli@${cliVersion}/go.mod`, 'utf8').catch(
      () => undefined,
    );
    if (goMod) {
      expect(`v${server}`).toBe(/go\.temporal\.io\/server (v[\d.]+)/.exec(goMod)?.[1]);
      expect(`v${tag(services['temporal-ui']!.image)}`).toBe(
        /temporalio\/ui-server\/v2 (v[\d.]+)/.exec(goMod)?.[1],
      );
    }
    // Schema: both stores, created, set up and upgraded by temporal-sql-tool before the server starts.
    const schema = await readFile(`${ROOT}/deploy/temporal-schema.sh`, 'utf8');
    for (const step of ['create', 'setup-schema -v 0.0', 'update-schema -d']) expect(schema).toContain(step);
    expect(schema).toContain('temporal:temporal temporal_visibility:visibility');
    expect(services['temporal-schema']!.entrypoint).toEqual(['/bin/sh', '/deploy/temporal-schema.sh']);
    expect(services.temporal!.depends_on!['temporal-schema']).toEqual({
      condition: 'service_completed_successfully',
    });
  });

  it('mounts a dynamic config that enables fairness', async () => {
    const { services } = await compose();
    const env = services.temporal!.environment!;
    const mount = services.temporal!.volumes!.find((v) => v.startsWith('./deploy/dynamicconfig:'))!;
    const [, target] = mount.split(':');
    expect(env.DYNAMIC_CONFIG_FILE_PATH).toBe(`${target}/vidbatch.yaml`);
    const config = parse(await readFile(`${ROOT}/deploy/dynamicconfig/vidbatch.yaml`, 'utf8')) as Record<
      string,
      { value: unknown; constraints?: unknown }[]
    >;
    expect(config['matching.enableFairness']).toEqual([{ value: true }]);
  });

  it('runs the server config and version scripts/cluster.sh runs natively', async () => {
    const { services } = await compose();
    expect(services.temporal!.volumes).toContain(
      './deploy/temporal-server.yaml:/etc/temporal/vidbatch-config/docker.yaml:ro',
    );
    expect(services.temporal!.environment).toMatchObject({
      TEMPORAL_CONFIG_DIR: 'vidbatch-config',
      TEMPORAL_ENVIRONMENT: 'docker',
    });
    const script = await readFile(`${ROOT}/scripts/cluster.sh`, 'utf8');
    expect(/^SERVER_VERSION=v([\d.]+)/m.exec(script)?.[1]).toBe(tag(services.temporal!.image));
    const cliVersion = /TEMPORAL_CLI_VERSION = '(v[\d.]+)'/.exec(await sourceText())?.[1];
    expect(/^CLI_VERSION=(v[\d.]+)/m.exec(script)?.[1]).toBe(cliVersion);
    for (const file of [
      'deploy/temporal-schema.sh',
      'deploy/temporal-namespace.sh',
      'deploy/temporal-server.yaml',
    ])
      expect(script).toContain(file.replace('deploy/', ''));
  });

  it('workers stop within a grace period longer than their own shutdown, and have a readiness healthcheck', async () => {
    const { services } = await compose();
    const worker = services.worker!;
    const source = await sourceText();
    // Both Temporal workers of a worker process give up after shutdownForceMs (src/config.ts): the longest
    // of the grace and the gateway timeouts (a submit on the wire is never aborted), plus a margin.
    expect(source.match(/shutdownForceTime: shutdownForceMs\(/g)).toHaveLength(2);
    // The settings compose gives the worker, read as the worker reads them (defaults included).
    const environment: NodeJS.ProcessEnv = { ...worker.environment, GATEWAY_API_KEY: 'sk-check' };
    delete environment.GATEWAY_API_KEY_FILE;
    const gateway = loadGatewaySettings({ ...environment, GATEWAY_BASE_URL: 'http://gateway/v1' });
    const { shutdownGraceMs } = loadWorkerSettings(environment);
    expect(shutdownGraceMs).toBeGreaterThan(0);
    const forceMs = shutdownForceMs(shutdownGraceMs, gateway);
    expect(forceMs).toBeGreaterThan(gateway.submitTimeoutMs!);
    // SIGKILL only after the worker's own backstop, with time to exit.
    expect(seconds(worker.stop_grace_period!)).toBeGreaterThanOrEqual(forceMs / 1000 + 5);
    expect(worker.init).toBe(true);
    const [kind, program, flag, script] = worker.healthcheck!.test;
    expect([kind, program, flag]).toEqual(['CMD', 'node', '-e']);
    expect(script).toContain('process.env.VIDBATCH_READY_FILE');
    expect(worker.environment!.VIDBATCH_READY_FILE).toMatch(/^\//);
    expect(worker.environment!.VIDBATCH_INPUT_ROOT).toBe('/data/batches');
    expect(worker.volumes).toContain('./batches:/data/batches:ro');
  });

  it("the workers' healthcheck passes against a real worker started as compose starts it, and fails once it stops", async () => {
    // Loaded here rather than at the top: only this test needs a server and a temporary folder.
    const { inject } = await import('vitest');
    const { mkdtemp } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const readyFile = `${await mkdtemp(`${tmpdir()}/vidbatch-health-`)}/worker.ready`;
    const { services } = await compose();
    const script = services.worker!.healthcheck!.test[3]!;
    const healthy = () =>
      run(process.execPath, ['-e', script], { env: { ...process.env, VIDBATCH_READY_FILE: readyFile } }).then(
        () => true,
        () => false,
      );
    expect(await healthy(), 'no worker yet').toBe(false);
    const worker = execFile(process.execPath, [CLI, ...(services.worker!.command as string[]).slice(0, 1)], {
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        VIDBATCH_TASK_QUEUE: `deploy-health-${process.pid}`,
        GATEWAY_BASE_URL: 'http://127.0.0.1:9/v1', // never called: no batch runs on this queue
        GATEWAY_API_KEY: '',
        GATEWAY_API_KEY_FILE: `${ROOT}deploy/simulator-api-key`,
        VIDBATCH_READY_FILE: readyFile,
      },
    });
    try {
      let ok = false;
      for (let i = 0; i < 120 && !ok && worker.exitCode === null; i++) {
        ok = await healthy();
        if (!ok) await new Promise((r) => setTimeout(r, 500));
      }
      expect(ok, 'healthy within 60 s').toBe(true);
    } finally {
      worker.kill('SIGTERM');
      await new Promise((r) => (worker.exitCode === null ? worker.once('exit', r) : r(undefined)));
    }
    expect(worker.exitCode, 'a stopped worker exits 0').toBe(0);
    expect(await healthy(), 'unhealthy once the worker is gone').toBe(false);
  });

  it('the image creates /data for the runtime user, so a fresh named volume is writable', async () => {
    const dockerfile = await readFile(`${ROOT}/Dockerfile`, 'utf8');
    const made = dockerfile.search(/RUN mkdir -p \/data\/out \/data\/batches && chown -R node:node \/data/);
    expect(made).toBeGreaterThan(-1);
    expect(made).toBeLessThan(dockerfile.indexOf('USER node'));
    const { services } = await compose();
    for (const name of ['worker', 'starter']) {
      expect(services[name]!.volumes).toContain('vidbatch-data:/data');
      expect(services[name]!.environment!.VIDBATCH_OUT_ROOT).toBe('/data/out');
    }
  });
});
