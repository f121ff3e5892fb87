// Before rolling out new workflow code while batches run: replays the histories of the open batch and prompt
// workflows of this version's task queue (VIDBATCH_TASK_QUEUE, default vidbatch-1) on the Temporal server
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY...) against the workflow code of this checkout. A
// history that does not replay would fail with a nondeterminism error on the new workers: fix the change with
// patched() before deploying. Batches of another major version run on their own task queue and are not
// checked: their own version's workers finish them.
//
//   npm run replay-check [-- --query "<visibility query>"] [--workflows <path>]
//
// Exit 0: every history replayed; 1: some did not (listed); 2: bad settings.
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { loadTemporalSettings } from '../src/config';
import { WORKFLOWS_PATH } from '../src/worker';

Runtime.install({ logger: new DefaultLogger('ERROR') });
const temporal = loadTemporalSettings();
const DEFAULT_QUERY =
  `ExecutionStatus = 'Running' AND WorkflowType IN ('batchWorkflow', 'promptWorkflow')` +
  ` AND TaskQueue = '${temporal.taskQueue}'`;

const { values } = parseArgs({
  options: {
    query: { type: 'string', default: DEFAULT_QUERY },
    workflows: { type: 'string', default: WORKFLOWS_PATH },
  },
});

if (!temporal.address) {
  console.error(
    'TEMPORAL_ADDRESS is not set: the replay check reads histories from the server you deploy to',
  );
  process.exit(2);
}
const connection = await Connection.connect(temporal.connectionOptions);
const client = new Client({ connection, namespace: temporal.namespace });
const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} };
const workflowBundle = await bundleWorkflowCode({ workflowsPath: values.workflows, logger: quiet });

let replayed = 0;
const failed: string[] = [];
const histories = client.workflow.list({ query: values.query }).intoHistories();
for await (const result of Worker.runReplayHistories({ workflowBundle }, histories)) {
  replayed += 1;
  if (result.error) {
    const reason = result.error instanceof Error ? result.error.message : String(result.error);
    failed.push(`${result.workflowId} (${result.runId}): ${reason.split('\n')[0]}`);
  }
}
await connection.close();

console.log(
  `Replayed ${replayed} open workflow histor${replayed === 1 ? 'y' : 'ies'} against ${values.workflows}: ` +
    `${replayed - failed.length} ok, ${failed.length} failed`,
);
for (const line of failed) console.log(`  ${line}`);
if (failed.length) {
  console.log('These runs would fail on the new code: guard the change with patched() before deploying.');
  process.exitCode = 1;
}
