// `vidbatch server`.
import { type Command, Option } from 'commander';
import { ConfigError } from '../../errors';
import { fail, port, waitForCtrlC } from '../support';

/**
 * dev-server's DEFAULT_DB_FILE, for the flag's default: that module loads Temporal, which `--help` must not
 * wait for (a unit test keeps the two equal).
 */
export const DEFAULT_DB_FILE_HELP = '.vidbatch/temporal.db';

export function registerServerCommand(program: Command): void {
  program
    .command('server')
    .summary('Run the Temporal dev server (with Web UI) in the foreground')
    .description(
      'Run the Temporal dev server (with Web UI) in the foreground, persisting to a SQLite file. vidbatch commands run in this folder use it (through .vidbatch/server.json) instead of opening the file themselves.',
    )
    .addOption(
      new Option('--db-file <path>', 'SQLite file').env('VIDBATCH_DB_FILE').default(DEFAULT_DB_FILE_HELP),
    )
    .addOption(new Option('--port <n>', 'gRPC port (default: a free one)').argParser(port))
    .addOption(new Option('--ui-port <n>', 'Web UI port (default: a free one)').argParser(port))
    .addOption(new Option('--namespace <ns>', 'namespace').env('TEMPORAL_NAMESPACE').default('default'))
    .action(async (opts: { dbFile: string; port?: number; uiPort?: number; namespace: string }) => {
      const [
        { startDevServer },
        { claimLocalServer, findLocalServer, forgetLocalServer, recordLocalServer },
      ] = await Promise.all([import('../../dev-server/dev-server'), import('../../dev-server/local-server')]);
      // One process at a time opens the database: another vidbatch here owning it is told, not raced.
      while (!(await claimLocalServer('server', opts.dbFile))) {
        const other = await findLocalServer(60_000, (m) => console.error(m)).catch(fail);
        if (other)
          fail(
            new ConfigError(
              `a vidbatch ${other.owner} (pid ${other.pid}) already runs the dev server of this folder at ${other.address}: use it, or stop it first`,
            ),
          );
      }
      const server = await startDevServer(opts).catch(async (err: unknown) => {
        await forgetLocalServer();
        throw err;
      });
      await recordLocalServer({
        pid: process.pid,
        owner: 'server',
        address: server.address,
        ...(server.uiUrl ? { uiUrl: server.uiUrl } : {}),
        dbFile: opts.dbFile,
      });
      console.log(`Temporal gRPC address: ${server.address}`);
      console.log(`Temporal Web UI:       ${server.uiUrl}`);
      console.log(
        `vidbatch commands in this folder use it; from elsewhere: export TEMPORAL_ADDRESS=${server.address}`,
      );
      await waitForCtrlC();
      await server.stop();
      await forgetLocalServer();
    });
}
