// The self-hosted stack, run for real: the Temporal server on PostgreSQL that scripts/cluster.sh
// brings up from the compose file's parts, two `vidbatch worker`s in separate folders sharing only the CSV
// folder and the output root (README "Deployment beyond one machine"), a hostile simulator, and during the
// batch a worker SIGKILLed, the Temporal server restarted and PostgreSQL restarted. Runs when
// VIDBATCH_CLUSTER_ADDRESS names the cluster (.ci/run sets it after `scripts/cluster.sh up`); skipped with a
// message otherwise, and a failure in CI, where the cluster must be up.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { writeVbenchCsv } from '../../bench/vbench';
import { findTemporalCli } from '../../src/dev-server/cli-binary';
import { vidbatch } from '../integration/cli-helpers';
import { hostileFlags, requireCluster, simulatorProcess, workerStarter } from './helpers';

const ADDRESS = requireCluster();
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SCRIPT = join(ROOT, 'scripts', 'cluster.sh');
const ROWS = 300;

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function cluster(command: string): Promise<void> {
  const started = Date.now();
  await promisify(execFile)('bash', [SCRIPT, command], { cwd: ROOT, timeout: 300_000 });
  console.log(`[cluster] scripts/cluster.sh ${command}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

describe.skipIf(!ADDRESS)('the self-hosted cluster (Temporal on PostgreSQL, scripts/cluster.sh)', () => {
  it('finishes a batch on two workers through a worker SIGKILL, a server restart and a PostgreSQL restart', async () => {
    const base = await mkdtemp(join(tmpdir(), 'vidbatch-cluster-'));
    // What the two machines share: the CSV folder (same path for the starter and both workers) and the
    // output root. Each worker has its own working folder and nothing else in common.
    const shared = { in: join(base, 'shared', 'batches'), out: join(base, 'shared', 'out') };
    const folders = [join(base, 'machine-1'), join(base, 'machine-2'), join(base, 'starter')];
    for (const dir of [shared.in, shared.out, ...folders]) await mkdir(dir, { recursive: true });
    const temporal = { TEMPORAL_ADDRESS: ADDRESS! };

    const sim = await simulatorProcess(hostileFlags(20), base, cleanups);
    const { baseUrl, apiKey, stats, until, recovery } = sim;

    const startWorker = workerStarter(
      {
        ...temporal,
        GATEWAY_BASE_URL: baseUrl,
        GATEWAY_API_KEY: apiKey,
        VIDBATCH_INPUT_ROOT: shared.in,
        VIDBATCH_OUT_ROOT: shared.out,
      },
      cleanups,
    );
    const workers = [await startWorker(folders[0]!), await startWorker(folders[1]!)];

    // Row ids unique to this run: the batch id is the content's hash, and the cluster outlives test runs.
    const csv = join(shared.in, 'prompts.csv');
    await writeVbenchCsv(csv, ROWS, 'all_dimension', Date.now() % 1_000_000_000);
    const run = await vidbatch(
      [
        'run',
        csv,
        '--detach',
        '--concurrency',
        '40',
        '--first-poll',
        '3',
        '--poll-interval',
        '1',
        '--no-adaptive-poll',
      ],
      { cwd: folders[2]!, env: temporal },
    );
    expect(run.code, run.stderr).toBe(0);
    const batch = /Started batch (batch-[0-9a-f]{16}-[0-9a-f]{8})/.exec(run.stderr)?.[1];
    expect(batch, run.stderr).toBeDefined();

    const recovered: Record<string, number> = {};
    await until(40);
    workers[0]!.child.kill('SIGKILL');
    await workers[0]!.done;
    workers[0] = await startWorker(folders[0]!);
    recovered['worker SIGKILL'] = await recovery();

    await until(110);
    await cluster('restart-server');
    recovered['Temporal server restart'] = await recovery();

    await until(180);
    await cluster('restart-db');
    recovered['PostgreSQL restart'] = await recovery();

    const watched = await vidbatch(['watch', batch!], { cwd: folders[2]!, env: temporal });
    expect([0, 3], watched.stdout + watched.stderr).toContain(watched.code); // 3: rows failed (checked below)

    // Every row exactly once in the manifest, each outcome a success or an unknown submit it reports.
    const lines = (await readFile(join(shared.out, batch!, 'manifest.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map(
        (l) =>
          JSON.parse(l) as { rowId: string; status: string; errorCode?: string; unknownSubmits?: number },
      );
    const perRow = new Map<string, number>();
    for (const r of lines) perRow.set(r.rowId, (perRow.get(r.rowId) ?? 0) + 1);
    expect(perRow.size).toBe(ROWS);
    expect([...perRow.values()].filter((n) => n !== 1)).toEqual([]);
    const failed = lines.filter((r) => r.status !== 'succeeded');
    expect(failed.filter((r) => r.errorCode !== 'submit_unknown')).toEqual([]);

    // A row has more than one job at the gateway only when its submit's outcome was unknown and the row says so.
    const s = await stats();
    const flagged = new Set(lines.filter((r) => (r.unknownSubmits ?? 0) > 0).map((r) => r.rowId));
    const paidTwice = Object.keys(s.idempotencyKeysBilledMoreThanOnce).map((k) => k.split(':')[2]!);
    expect(paidTwice.filter((row) => !flagged.has(row))).toEqual([]);
    expect(s.jobsCreated).toBeGreaterThanOrEqual(ROWS - failed.length);

    // The dynamic config is in force on the real server: one partition for the gateway queue (the default,
    // more, for the workflow queue), and the learner's rate limit set on it (updateTaskQueueConfig).
    const cli = (await findTemporalCli({ provision: false })).path;
    const temporalJson = async (...args: string[]) =>
      JSON.parse(
        (await promisify(execFile)(cli, [...args, '--address', ADDRESS!, '-o', 'json'], { timeout: 30_000 }))
          .stdout,
      ) as Record<string, unknown>;
    const partitions = async (queue: string) =>
      (
        (await temporalJson('task-queue', 'list-partition', '--task-queue', queue))
          .activityTaskQueuePartitions as unknown[]
      ).length;
    expect(await partitions('vidbatch-1-gateway')).toBe(1);
    expect(await partitions('vidbatch-1')).toBeGreaterThan(1);
    const config = JSON.stringify(
      await temporalJson(
        'task-queue',
        'config',
        'get',
        '--task-queue',
        'vidbatch-1-gateway',
        '--task-queue-type',
        'activity',
      ),
    );
    const serverRps = Number(/"requestsPerSecond":\s*([\d.]+)/.exec(config)?.[1]);
    expect(serverRps, config).toBeGreaterThan(0);

    // Search attributes in PostgreSQL visibility: `status` counts the prompt workflows by VidbatchState for
    // this BatchId, and `list` finds the batch.
    // Visibility is written a little after the workflows close: read until it has every prompt.
    let counted = 0;
    let status = { code: null as number | null, stdout: '', stderr: '' };
    for (let i = 0; i < 30 && counted !== ROWS; i++) {
      if (i > 0) await sleep(1000);
      status = await vidbatch(['status', batch!], { cwd: folders[2]!, env: temporal });
      const states = /prompt workflows: (.*)/.exec(status.stdout)?.[1] ?? '';
      counted = [...states.matchAll(/(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
    }
    expect(status.code, status.stderr).toBe(0);
    expect(counted, status.stdout).toBe(ROWS);
    const list = await vidbatch(['list', '--json'], { cwd: folders[2]!, env: temporal });
    expect(list.stdout).toContain(batch!);

    console.log(
      `[cluster] ${ROWS} rows, 2 workers: lost ${ROWS - perRow.size}, failed ${failed.length} (submit_unknown), ` +
        `paid twice ${paidTwice.length} (all flagged), jobs ${s.jobsCreated}, faults ${JSON.stringify(s.faultsInjected)}; ` +
        `gateway queue limit on the server ${serverRps} requests/s; seconds to the next new job after: ` +
        Object.entries(recovered)
          .map(([what, secs]) => `${what} ${secs.toFixed(1)}`)
          .join(', '),
    );
  }, 900_000);
});
