// `vidbatch server`.
import { type Command, Option } from 'commander';
import { DEFAULT_DB_FILE, startDevServer } from '../../dev-server/dev-server';
import { number, waitForCtrlC } from '../support';

export function registerServerCommand(program: Command): void {
  program
    .command('server')
    .description('Run the Temporal dev server (with Web UI) in the foreground, persisting to a SQLite file.')
    .addOption(new Option('--db-file <path>', 'SQLite file').env('VIDBATCH_DB_FILE').default(DEFAULT_DB_FILE))
    .addOption(new Option('--port <n>', 'gRPC port (default: a free one)').argParser(number))
    .addOption(new Option('--ui-port <n>', 'Web UI port (default: a free one)').argParser(number))
    .addOption(new Option('--namespace <ns>', 'namespace').env('TEMPORAL_NAMESPACE').default('default'))
    .action(async (opts: { dbFile: string; port?: number; uiPort?: number; namespace: string }) => {
      const server = await startDevServer(opts);
      console.log(`Temporal gRPC address: ${server.address}`);
      console.log(`Temporal Web UI:       ${server.uiUrl}`);
      console.log(`Use it from another shell: export TEMPORAL_ADDRESS=${server.address}`);
      await waitForCtrlC();
      await server.stop();
    });
}
