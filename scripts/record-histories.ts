// Records histories of real batches into test/fixtures/histories/<label>/ for the replay test: one set per
// workflow version (a new major version replaces it). Run: npm run record-histories -- <label>
// The batches, one after the other against one simulator and one worker, cover every path of the workflows:
// A  fresh submits, a moderation failure, 429s (the learner), continue-as-new;
// B  a refused key: the batch pauses, and goes on after resume;
// D  submits whose outcome is unknown: resent once with the same key, then the row fails submit_unknown;
// E  a running-jobs cap: refused submits wait for a slot from the batch (the capacity gate);
// F  cancelled while its jobs run, then run again: the re-run checks the known jobs before paying again;
// G  another file with requests A and F paid for: those rows are recorded from the earlier jobs at no cost;
// H  --enhance: prompts rewritten through the chat completions before the submit (a chat 429 waited out, a
//    broken answer ending its row enhance_failed), and a row of a reviewed CSV sent as written;
// C  --verify strict: a video that differs from its request fails its row; spare status checks (by then the
//    worker has learned the job latency); status checks too short (3 s) to fetch a video with them, so the
//    download activity fetches it (in A to H, the check that finds a job completed fetches its video).
import { rm, mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { stringify } from 'csv-stringify/sync';
import { resumeUpdate } from '../src/contract/messages';
import { startSimulator } from '../src/simulator/server';
import { getProgress, startBatch, type StartBatchOptions } from '../src/client/batches';
import type { Session } from '../src/client/session';
import { runCli } from '../src/dev-server/cli-binary';
import { startDevServer } from '../src/dev-server/dev-server';
import { createWorker } from '../src/worker';
import { gatewayTarget } from '../src/config';

Runtime.install({ logger: new DefaultLogger('WARN') });
const label = process.argv[2];
if (!label) throw new Error('usage: npm run record-histories -- <label> (the folder, e.g. v1)');
const OUT = fileURLToPath(new URL(`../test/fixtures/histories/${label}/`, import.meta.url));
const poll = { firstPollMs: 300, intervalMs: 200, backoff: 1.2, capMs: 1000, jitter: 0.1 };
const TASK_QUEUE = 'record';

const server = await startDevServer({ dbFile: ':memory:', headless: true });
const sim = await startSimulator({
  jobSeconds: 0.6,
  jobJitterSeconds: 0.2,
  rateLimit: 5,
  burst: 5,
  faults: {
    moderationWords: ['forbidden'],
    wrongDurationWords: ['stretched'],
    chat429Words: ['gusty'],
    chatEmptyWords: ['blank'],
  },
});
const dir = await mkdtemp(join(tmpdir(), 'vidbatch-record-'));
const nativeConnection = await NativeConnection.connect({ address: server.address });
const worker = await createWorker({
  connection: nativeConnection,
  namespace: 'default',
  taskQueue: TASK_QUEUE,
  gateway: { baseUrl: sim.baseUrl, apiKey: () => sim.apiKey, timeoutMs: 2000 },
  outRoot: join(dir, 'out'),
});
const client = new Client({ connection: await Connection.connect({ address: server.address }) });
const session: Session = {
  client,
  taskQueue: TASK_QUEUE,
  namespace: 'default',
  target: gatewayTarget(sim.baseUrl),
  close: async () => {},
};
/** Batches whose histories are not recorded. */
const skipped = new Set<string>();
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

// A Slack-style receiver that takes every notice: batch B's pause and end are told (notice workflows recorded).
const receiver = createServer((req, res) => req.resume().on('end', () => res.writeHead(200).end()));
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
const notify = [`slack+http://127.0.0.1:${(receiver.address() as AddressInfo).port}/slack`];

async function csv(name: string, prompts: string[]): Promise<string> {
  const path = join(dir, `${name}.csv`);
  await writeFile(path, stringify([['id', 'prompt'], ...prompts.map((p, i) => [`${name}${i + 1}`, p])]));
  return path;
}

async function run(name: string, prompts: string[], options: StartBatchOptions) {
  return startBatch(session, await csv(name, prompts), { poll, ...options });
}

const result = (b: Awaited<ReturnType<typeof run>>) =>
  b.handle.result().catch((err: unknown) => (err instanceof WorkflowFailedError ? err.message : err));

await worker.runUntil(async () => {
  const a = await run(
    'a',
    [
      'a red fox',
      'a forbidden dance',
      'a quiet harbour',
      'a city at night',
      'a mountain lake',
      'snow in a forest',
      'a busy market',
      'a lighthouse',
    ],
    { concurrency: 8, promptsPerRun: 4, pageSize: 3 },
  );
  console.log('A', await result(a));

  const b = await run('b', ['a calm sea', 'a desert road', 'a rainy street'], { concurrency: 3, notify });
  const key = [...sim.state.keys.values()][0]!;
  while (((await getProgress(b.handle))?.inFlight ?? 0) < 3) await pause(50);
  key.enabled = false;
  while (!(await getProgress(b.handle))?.pausedReason) await pause(50);
  key.enabled = true;
  await b.handle.executeUpdate(resumeUpdate);
  console.log('B', await result(b));

  sim.setFaults({ drop: 1, scope: 'submit' });
  const d = await run('d', ['a paper boat', 'a kite'], { concurrency: 2, onUnknownSubmit: 'resend' });
  console.log('D', await result(d));
  sim.setFaults({ drop: 0, scope: 'all' });

  sim.setOptions({ maxRunningJobs: 1 });
  sim.setFaults({ retryAfterMinSeconds: 3 });
  const e = await run('e', ['a windmill', 'a canyon', 'a glacier'], { concurrency: 3 });
  console.log('E', await result(e));
  sim.setOptions({ maxRunningJobs: 0 });
  sim.setFaults({ retryAfterMinSeconds: 0 });

  sim.setOptions({ jobSeconds: 4, jobJitterSeconds: 0 });
  const fPrompts = ['a night train', 'a harbour crane', 'a tea garden'];
  const before = sim.stats().jobsCreated;
  const f = await run('f', fPrompts, { concurrency: 3 });
  while (sim.stats().jobsCreated < before + 3) await pause(50);
  await pause(500); // every row's job was made: the prompts wait for its first check
  await f.handle.cancel();
  console.log('F cancelled', await result(f));
  sim.setOptions({ jobSeconds: 0.6, jobJitterSeconds: 0.2 });
  const again = await run('f', fPrompts, { concurrency: 3 });
  console.log('F again', await result(again));

  // G: another file with requests A and F paid for, and one new: reused rows are recorded at no cost.
  const g = await run('g', ['a quiet harbour', 'a night train', 'a new pier at dawn'], { concurrency: 3 });
  console.log('G', await result(g));

  const enhance = { model: 'modelfamily-chat-1.0', instructions: 'Add camera, light and motion detail.' };
  const h = await run('h', ['a gusty cliff', 'a blank canvas', 'a copper kettle'], {
    concurrency: 3,
    enhance,
  });
  console.log('H', await result(h));
  const reviewed = join(dir, 'h-reviewed.csv');
  await writeFile(
    reviewed,
    stringify([
      ['id', 'prompt', 'original_prompt'],
      ['hr1', 'a tin robot, slow pan, warm light', 'a tin robot'],
    ]),
  );
  const hr = await startBatch(session, reviewed, { poll, enhance });
  console.log('H reviewed', await result(hr));

  // Warm-up (not recorded): first checks of jobs of 0.5-3.5 s at three ages teach the worker a job latency
  // whose finished share grows with age, so a job's due check comes well after the age from which spare
  // checks may find it finished.
  sim.setOptions({ jobSeconds: 2, jobJitterSeconds: 1.5 });
  for (const firstPollMs of [800, 1600, 2400]) {
    const warmUp = await run(
      `w${firstPollMs}`,
      Array.from({ length: 8 }, (_, i) => `a warm-up scene ${firstPollMs} ${i + 1}`),
      { concurrency: 8, poll: { ...poll, firstPollMs, adaptive: false } },
    );
    await result(warmUp);
    skipped.add(warmUp.batchId);
  }
  sim.setOptions({ jobSeconds: 0.6, jobJitterSeconds: 0.2 });

  // Last: the worker knows the job latency, so the first checks wait on spare ones.
  const c = await run(
    'c',
    [
      'a green valley',
      'a stretched horizon',
      'a quiet library',
      'an old bridge',
      'a salt marsh',
      'a red barn',
    ],
    {
      concurrency: 4,
      downloadDir: join(dir, 'videos'),
      verify: 'strict',
      activityTimeoutMs: 3_000,
    },
  );
  console.log('C', await result(c));
});

await rm(OUT, { recursive: true, force: true });
await mkdir(OUT, { recursive: true });
let count = 0;
for await (const wf of client.workflow.list({ query: `TaskQueue = '${TASK_QUEUE}'` })) {
  if (skipped.has(wf.workflowId.split('/')[0]!)) continue;
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
  // Run ids begin with their time: their end tells runs of one workflow apart.
  const name = `${wf.type}-${wf.workflowId.replace(/[^\w.-]+/g, '_')}-${wf.runId.slice(-12)}.json`;
  await writeFile(join(OUT, name), json);
  count += 1;
}
console.log(`recorded ${count} histories into ${OUT}; 429s sent: ${sim.stats().rateLimited}`);
await nativeConnection.close();
await client.connection.close();
await sim.close();
await server.stop();
receiver.close();
