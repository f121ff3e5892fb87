// `vidbatch worker`.
import { type Command, Option } from 'commander';
import { runWorker } from '../../worker';
import { fail } from '../support';

export function registerWorkerCommand(program: Command): void {
  program
    .command('worker')
    .description(
      'Run a worker alone (server and workers elsewhere). Reads TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, VIDBATCH_TASK_QUEUE, GATEWAY_BASE_URL, GATEWAY_API_KEY (or GATEWAY_API_KEY_FILE).',
    )
    .addOption(
      new Option('--out <dir>', 'root of the per-batch output folders')
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
    .action(async (o: { out: string; gatewayRps?: string }) => {
      const env = o.gatewayRps ? { ...process.env, VIDBATCH_GATEWAY_RPS: o.gatewayRps } : process.env;
      await runWorker(env, o.out).catch(fail);
    });
}
