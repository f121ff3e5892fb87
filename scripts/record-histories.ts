// Records histories of real batches (continue-as-new, a moderation failure, 429s, a 403 pause and resume)
// into test/fixtures/histories/<label>/ for the replay test. Run: npm run record-histories -- <label>
// Keep the folders of earlier workflow versions: replaying them proves running batches survive an upgrade.
import { rm, mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { stringify } from 'csv-stringify/sync';
import { resumeUpdate } from '../src/contract/messages';
import { startSimulator } from '../src/simulator/server';
import { getProgress, startBatch } from '../src/client/batches';
import type { Session } from '../src/client/session';
import { runCli } from '../src/dev-server/cli-binary';
import { startDevServer } from '../src/dev-server/dev-server';
import { createWorker } from '../src/worker';

Runtime.install({ logger: new DefaultLogger('WARN') });
const label = process.argv[2];
if (!label) throw new Error('usage: npm run record-histories -- <label> (a new folder, e.g. v3-something)');
const OUT = fileURLToPath(new URL(`../test/fixtures/histories/${label}/`, import.meta.url));
const poll = { firstPollMs: 300, intervalMs: 200, backoff: 1.2, capMs: 1000, jitter: 0.1 };

const server = await startDevServer({ dbFile: ':memory:', headless: true });
const sim = await startSimulator({
  jobSeconds: 0.6,
  jobJitterSeconds: 0.2,
  rateLimit: 5,
  burst: 5,
  faults: { moderationWords: ['forbidden'] },
});
const dir = await mkdtemp(join(tmpdir(), 'vidbatch-record-'));
const nativeConnection = await NativeConnection.connect({ address: server.address });
const worker = await createWorker({
  connection: nativeConnection,
  namespace: 'default',
  taskQueue: 'record',
  gateway: { baseUrl: sim.baseUrl, apiKey: () => sim.apiKey, timeoutMs: 2000 },
  outRoot: join(dir, 'out'),
});
const client = new Client({ connection: await Connection.connect({ address: server.address }) });
const session: Session = { client, taskQueue: 'record', namespace: 'default', close: async () => {} };

await worker.runUntil(async () => {
  const first = join(dir, 'mixed.csv');
  const prompts = [
    'a red fox',
    'a forbidden dance',
    'a quiet harbour',
    'a city at night',
    'a mountain lake',
    'snow in a forest',
    'a busy market',
    'a lighthouse',
  ];
  await writeFile(first, stringify([['id', 'prompt'], ...prompts.map((p, i) => [`r${i + 1}`, p])]));
  // Both batches on the shared budget (gateway queue, first-check timer, the learner): batch A continues as
  // new, batch B pauses on a refused key.
  const a = await startBatch(session, first, { concurrency: 8, poll, promptsPerRun: 4, pageSize: 3 });
  console.log('batch A', await a.handle.result());

  const second = join(dir, 'auth.csv');
  await writeFile(
    second,
    stringify([
      ['id', 'prompt'],
      ['p1', 'a calm sea'],
      ['p2', 'a desert road'],
      ['p3', 'a rainy street'],
    ]),
  );
  const b = await startBatch(session, second, { concurrency: 3, poll });
  const key = [...sim.state.keys.values()][0]!;
  while (((await getProgress(b.handle))?.inFlight ?? 0) < 3) await new Promise((r) => setTimeout(r, 50));
  key.enabled = false;
  while (!(await getProgress(b.handle))?.pausedReason) await new Promise((r) => setTimeout(r, 50));
  key.enabled = true;
  await b.handle.executeUpdate(resumeUpdate);
  console.log('batch B', await b.handle.result());
});

await rm(OUT, { recursive: true, force: true });
await mkdir(OUT, { recursive: true });
let count = 0;
for await (const wf of client.workflow.list({ query: `TaskQueue = 'record'` })) {
  // The CLI writes the standard JSON history format (the SDK's historyToJSON trips over a protobufjs mismatch).
  const json = await runCli(server.cliPath, [
    'workflow',
    'show',
    '--address',
    server.address,
    '--workflow-id',
    wf.workflowId,
    '--run-id',
    wf.runId,
    '--output',
    'json',
  ]);
  const name = `${wf.type}-${wf.workflowId.replace(/[^\w.-]+/g, '_')}-${wf.runId.slice(0, 8)}.json`;
  await writeFile(join(OUT, name), json);
  count += 1;
}
console.log(`recorded ${count} histories into ${OUT}; 429s sent: ${sim.stats().rateLimited}`);
await nativeConnection.close();
await client.connection.close();
await sim.close();
await server.stop();
