// `vidbatch worker`.
import { type Command, Option } from 'commander';
import { fail, hiddenAlias } from '../support';

interface WorkerFlags {
  outRoot: string;
  gatewayRps?: string;
  deploymentName?: string;
  buildId?: string;
  makeCurrent?: boolean;
}

export function registerWorkerCommand(program: Command): void {
  const command = program
    .command('worker')
    .summary('Run a worker alone, for a server and workers elsewhere')
    .description(
      'Run a worker alone (server and workers elsewhere). Reads TEMPORAL_ADDRESS (default: the `vidbatch server` running in this folder), TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, VIDBATCH_TASK_QUEUE, GATEWAY_BASE_URL, GATEWAY_API_KEY (or GATEWAY_API_KEY_FILE); ' +
        'VIDBATCH_INPUT_ROOT (CSVs are read only under it; default: the working directory), VIDBATCH_DOWNLOAD_ROOT (default: the out root), ' +
        'VIDBATCH_SHUTDOWN_GRACE_MS (on SIGTERM/SIGINT it sends no new gateway request, running activities get this long to finish, and gateway calls on the wire wait for their answer, up to GATEWAY_SUBMIT_TIMEOUT_MS; default 30000), VIDBATCH_READY_FILE (exists while polling).',
    )
    .addOption(
      new Option(
        '--out-root <dir>',
        'root of the per-batch output folders; results are written only under it',
      )
        .env('VIDBATCH_OUT_ROOT')
        .default('out'),
    )
    .addOption(
      new Option('--metrics <host:port>', 'serve Prometheus metrics at http://<host:port>/metrics').env(
        'VIDBATCH_METRICS_ADDRESS',
      ),
    )
    .addOption(
      new Option(
        '--gateway-rps <rps>',
        "the gateway's published rate limit for all workers on this task queue (default: learned)",
      ).env('VIDBATCH_GATEWAY_RPS'),
    )
    .addOption(
      new Option(
        '--deployment-name <name>',
        'Worker Versioning: the Worker Deployment this worker belongs to (with --build-id; default: unversioned)',
      ).env('VIDBATCH_DEPLOYMENT_NAME'),
    )
    .addOption(
      new Option(
        '--build-id <id>',
        'Worker Versioning: the build of this code; prompts stay on the build that started them',
      ).env('VIDBATCH_BUILD_ID'),
    )
    .addOption(
      new Option(
        '--make-current',
        "once polling, make this build its deployment's current version: new prompts and every batch move to it (env: VIDBATCH_MAKE_CURRENT=true)",
      ),
    );
  hiddenAlias(command, new Option('--out <dir>', 'old name of --out-root'), 'outRoot');
  command.action(async (o: WorkerFlags) => {
    const [{ findLocalServer }, { runWorker }] = await Promise.all([
      import('../../dev-server/local-server'),
      import('../../worker'),
    ]);
    const env: NodeJS.ProcessEnv = { ...process.env };
    if (o.gatewayRps) env.VIDBATCH_GATEWAY_RPS = o.gatewayRps;
    if (o.deploymentName) env.VIDBATCH_DEPLOYMENT_NAME = o.deploymentName;
    if (o.buildId) env.VIDBATCH_BUILD_ID = o.buildId;
    if (o.makeCurrent) env.VIDBATCH_MAKE_CURRENT = 'true';
    if (!env.TEMPORAL_ADDRESS) {
      const local = await findLocalServer(60_000, (m) => console.error(m)).catch(fail);
      if (local?.address) env.TEMPORAL_ADDRESS = local.address;
    }
    await runWorker(env, o.outRoot).catch(fail);
  });
}
