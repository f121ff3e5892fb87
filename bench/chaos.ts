// `npm run chaos`: a batch under faults (5xx, slow responses past the client timeout, dropped connections,
// malformed bodies, 502/504 after the job was made, undocumented statuses, 429 bursts) while the worker is
// SIGKILLed 5 times and the dev server restarted once on the same SQLite file, against a gateway that ignores
// Idempotency-Key (`--idempotency` to honour it). Then it checks the promises and exits non-zero on a miss:
// with the key ignored, every row billed more than once must report its unknown submits, and extra jobs are
// bounded by the unknown outcomes reported (and by the ambiguous faults the simulator injected).
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { Command, Option } from 'commander';
import type { PromptResult } from '../src/contract/prompt';
import { startSimulator } from '../src/simulator/server';
import { getProgress, startBatch } from '../src/client/batches';
import { resumeUpdate } from '../src/contract/messages';
import type { Session } from '../src/client/session';
import { freePort, startDevServer, type DevServer } from '../src/dev-server/dev-server';
import { writeVbenchCsv } from './vbench';
import { gatewayTarget } from '../src/config';

const CLI = fileURLToPath(new URL('../bin/vidbatch.mjs', import.meta.url));
const o = new Command('chaos')
  .addOption(new Option('--prompts <n>', 'prompts').argParser(Number).default(500))
  .addOption(new Option('--kills <n>', 'worker SIGKILLs').argParser(Number).default(5))
  .addOption(new Option('--seed <n>', 'fault dice').argParser(Number).default(11))
  .addOption(
    new Option(
      '--give-up-after <s>',
      'a batch not ended by then fails the run, with its progress, the events and the worker log',
    ).argParser(Number),
  )
  .addOption(new Option('--idempotency', 'the simulator honours Idempotency-Key (default: ignores it)'))
  .addOption(
    new Option('--on-unknown-submit <policy>', 'resend or fail')
      .choices(['resend', 'fail'])
      .default('resend'),
  )
  .parse(process.argv)
  .opts<{
    prompts: number;
    kills: number;
    seed: number;
    giveUpAfter?: number;
    idempotency?: boolean;
    onUnknownSubmit: 'resend' | 'fail';
  }>();

const dir = await mkdtemp(join(tmpdir(), 'vidbatch-chaos-'));
const dbFile = join(dir, 'temporal.db');
const port = await freePort();
let server: DevServer = await startDevServer({ dbFile, port, headless: true, log: () => {} });
const sim = await startSimulator({
  jobSeconds: 3,
  jobJitterSeconds: 1.5,
  seed: o.seed,
  idempotency: Boolean(o.idempotency),
  faults: {
    error5xx: 0.05,
    slow: 0.02,
    slowMs: 2500,
    drop: 0.01,
    malformed: 0.01,
    error502After: 0.01,
    error504After: 0.01,
    unknownStatus: 0.02,
  },
});
const csv = join(dir, 'chaos.csv');
await writeVbenchCsv(csv, o.prompts, 'all_dimension_longer');
const logFile = join(dir, 'worker.log');
const log = createWriteStream(logFile);

let worker: ChildProcess | undefined;
const startWorker = () => {
  worker = spawn(process.execPath, [CLI, 'worker'], {
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: server.address,
      VIDBATCH_TASK_QUEUE: 'chaos',
      GATEWAY_BASE_URL: sim.baseUrl,
      GATEWAY_API_KEY: sim.apiKey,
      GATEWAY_TIMEOUT_MS: '2000',
      GATEWAY_SUBMIT_TIMEOUT_MS: '2000',
      VIDBATCH_OUT_ROOT: join(dir, 'out'),
      VIDBATCH_INPUT_ROOT: dir,
      VIDBATCH_LOG_LEVEL: 'INFO',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  worker.stdout?.pipe(log, { end: false });
  worker.stderr?.pipe(log, { end: false });
};
startWorker();

const client = new Client({ connection: await Connection.connect({ address: server.address }) });
const session: Session = {
  client,
  taskQueue: 'chaos',
  namespace: 'default',
  target: gatewayTarget(sim.baseUrl),
  close: async () => {},
};
const started = Date.now();
const { handle, batchId } = await startBatch(session, csv, {
  concurrency: 50,
  poll: { firstPollMs: 2000, intervalMs: 1000, backoff: 1.2, capMs: 3000, jitter: 0.2 },
  activityTimeoutMs: 5000,
  submitTimeoutMs: 5000,
  onUnknownSubmit: o.onUnknownSubmit,
  promptsPerRun: 200,
});
let done = false;
const result = handle.result().finally(() => (done = true));
// A run that never ends says where it stood, instead of being killed from outside with nothing to show.
const giveUp =
  o.giveUpAfter &&
  setTimeout(() => {
    void (async () => {
      console.log(`FAIL the batch did not end within ${o.giveUpAfter} s`);
      console.log(`progress: ${JSON.stringify(await getProgress(handle).catch((e: unknown) => String(e)))}`);
      for (const e of events) console.log(`  ${e}`);
      // What each prompt still running waits on: its pending activities and its last events.
      for await (const wf of client.workflow.list({
        query: `BatchId = '${batchId}' AND WorkflowType = 'promptWorkflow' AND ExecutionStatus = 'Running'`,
      })) {
        const handle = client.workflow.getHandle(wf.workflowId);
        const described = await handle.describe();
        const pending = described.raw.pendingActivities?.map((a) => ({
          type: a.activityType?.name,
          state: a.state,
          attempt: a.attempt,
          lastFailure: a.lastFailure?.message,
          scheduled: a.scheduledTime?.seconds?.toString(),
          nextAttempt: a.nextAttemptScheduleTime?.seconds?.toString(),
        }));
        const history = await handle.fetchHistory();
        const last = (history.events ?? []).slice(-6).map((e) => e.eventType);
        console.log(
          `${wf.workflowId}: pending ${JSON.stringify(pending)}; last events ${JSON.stringify(last)}`,
        );
      }
      const workerLog = await readFile(logFile, 'utf8').catch(() => '');
      console.log(`worker log (last 40 lines):\n${workerLog.split('\n').slice(-40).join('\n')}`);
      worker?.kill('SIGKILL');
      process.exit(1);
    })();
  }, o.giveUpAfter * 1000);

// The chaos: kills at random moments, one server restart, and 429 bursts on their own clock.
const events: string[] = [];
const bursts = setInterval(() => {
  sim.state.options.rateLimit = 3;
  events.push(`${((Date.now() - started) / 1000).toFixed(1)}s 429 burst (gateway limited to 3 rps for 4 s)`);
  setTimeout(() => (sim.state.options.rateLimit = 0), 4000);
}, 15_000);
// The operator on call: the unknown-outcome breaker pauses the batch after a run of unknown submits (the
// faults make those), and a person would look at the gateway and resume it. Chaos does so, and says when.
const operator = (async () => {
  while (!done) {
    await sleep(2000);
    const progress = await getProgress(handle).catch(() => undefined);
    if (done || progress?.pauseKind !== 'breaker') continue;
    events.push(
      `${((Date.now() - started) / 1000).toFixed(1)}s breaker paused the batch; resumed as an operator would`,
    );
    await handle.executeUpdate(resumeUpdate).catch(() => undefined);
  }
})();
const random = (a: number, b: number) => a + Math.random() * (b - a);
for (let kill = 1; kill <= o.kills && !done; kill++) {
  await sleep(random(4000, 12000));
  if (done) break;
  worker?.kill('SIGKILL');
  events.push(`${((Date.now() - started) / 1000).toFixed(1)}s SIGKILL worker #${kill}`);
  if (kill === Math.ceil(o.kills / 2)) {
    await server.stop();
    server = await startDevServer({ dbFile, port, headless: true, log: () => {} });
    events.push(
      `${((Date.now() - started) / 1000).toFixed(1)}s dev server restarted on the same SQLite file`,
    );
  }
  await sleep(1000);
  startWorker();
}
const final = await result;
if (giveUp) clearTimeout(giveUp);
await operator;
clearInterval(bursts);
const makespan = (Date.now() - started) / 1000;

// The checks.
const failures: string[] = [];
const check = (ok: boolean, what: string) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
};
const lines = (await readFile(final.manifestPath, 'utf8')).split('\n').filter(Boolean);
const records = lines.map((l) => JSON.parse(l) as PromptResult);
const perRow = new Map<string, number>();
for (const r of records) perRow.set(r.rowId, (perRow.get(r.rowId) ?? 0) + 1);
check(
  perRow.size === o.prompts && [...perRow.values()].every((n) => n === 1),
  `every row terminal exactly once in the manifest (${perRow.size} rows, ${lines.length} lines)`,
);
check(
  records.every((r) => r.status !== 'succeeded' || !!r.url),
  'no URL missing on a succeeded row',
);
const stats = sim.stats();
const jobsPerRow = new Map<string, number>();
for (const job of sim.state.jobs.values()) {
  const rowId = job.idempotencyKey?.split(':')[2];
  if (rowId) jobsPerRow.set(rowId, (jobsPerRow.get(rowId) ?? 0) + 1);
}
const unknownByRow = new Map(records.map((r) => [r.rowId, r.unknownSubmits ?? 0] as const));
const billedTwice = [...jobsPerRow].filter(([, n]) => n > 1);
const extraJobs = billedTwice.reduce((sum, [, n]) => sum + n - 1, 0);
const flagged = records.filter((r) => (r.unknownSubmits ?? 0) > 0);
const reportedUnknown = flagged.reduce((sum, r) => sum + (r.unknownSubmits ?? 0), 0);
if (o.idempotency) {
  check(
    stats.jobsCreated === o.prompts && stats.bodiesWithMultipleJobs === 0,
    `zero jobs paid twice with the key honoured (${stats.jobsCreated} jobs for ${o.prompts} rows; ${stats.idempotentReplays} idempotent replays)`,
  );
} else {
  check(
    billedTwice.every(([rowId, n]) => (unknownByRow.get(rowId) ?? 0) >= n - 1),
    `every row billed more than once reports its unknown submits (${billedTwice.length} rows billed twice, ${flagged.length} rows flagged)`,
  );
  check(
    extraJobs <= reportedUnknown,
    `extra jobs (${extraJobs}) <= unknown outcomes reported (${reportedUnknown}); ambiguous faults injected: ${stats.ambiguousSubmitsTotal}`,
  );
  check(
    o.onUnknownSubmit !== 'fail' || stats.idempotencyKeysWithMultipleJobs === 0,
    `--on-unknown-submit ${o.onUnknownSubmit}: ${stats.idempotencyKeysWithMultipleJobs} rows billed more than once`,
  );
}
let histories = 0;
let leaked = 0;
for await (const wf of client.workflow.list({ query: `BatchId = '${batchId}'` })) {
  const history = JSON.stringify(await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory());
  histories += 1;
  if (history.includes(sim.apiKey)) leaked += 1;
}
check(leaked === 0, `API key absent from all ${histories} workflow histories`);
log.end();
await sleep(200);
check(!(await readFile(logFile, 'utf8')).includes(sim.apiKey), 'API key absent from the worker logs');

console.log(
  `\n${o.prompts} prompts in ${makespan.toFixed(0)} s: ${final.succeeded} succeeded, ${final.failed} failed`,
);
console.log(`faults injected: ${JSON.stringify(stats.faultsInjected)}; 429s sent: ${stats.rateLimited}`);
console.log(
  `idempotency ${o.idempotency ? 'honoured' : 'ignored'}: ${stats.jobsCreated} jobs for ${o.prompts} rows; ` +
    `jobs per key ${JSON.stringify(stats.jobsPerIdempotencyKey)}; ${stats.ambiguousSubmitsTotal} ambiguous submits; ` +
    `${flagged.length} rows with unknown submits; ${records.filter((r) => r.errorCode === 'submit_unknown').length} failed submit_unknown`,
);
for (const e of events) console.log(`  ${e}`);
worker?.kill('SIGKILL');
await client.connection.close();
await sim.close();
await server.stop();
process.exit(failures.length ? 1 : 0);
