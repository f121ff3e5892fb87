// The `vidbatch` program: its commands (each in commands/<name>.ts, parsing its flags and loading the modules
// that do the work only when it runs), grouped as `vidbatch --help` shows them, and the runtime set-up before
// any command. Building it parses nothing and loads only commander and the flag definitions, so `--help` is
// fast and scripts/cli-docs.ts can read every command's help from it.
import { Command } from 'commander';
import { exitCodeFor } from '../errors';
import { registerCancelCommand } from './commands/cancel';
import { registerDoctorCommand } from './commands/doctor';
import { registerDownloadCommand } from './commands/download';
import { registerListCommand } from './commands/list';
import { registerPauseCommand } from './commands/pause';
import { registerPlanCommand } from './commands/plan';
import { registerReportCommand } from './commands/report';
import { registerResultsCommand } from './commands/results';
import { registerResumeCommand } from './commands/resume';
import { registerReviewCommand } from './commands/review';
import { registerRetryFailedCommand } from './commands/retry-failed';
import { registerRunCommand } from './commands/run';
import { registerServerCommand } from './commands/server';
import { registerSetConcurrencyCommand } from './commands/set-concurrency';
import { registerSimulatorCommand } from './commands/simulator';
import { registerStatusCommand } from './commands/status';
import { registerValidateCommand } from './commands/validate';
import { registerWatchCommand } from './commands/watch';
import { registerWorkerCommand } from './commands/worker';

type Register = (program: Command) => void;

/** The command groups of `vidbatch --help`, in its order. */
const GROUPS: [heading: string, commands: Register[]][] = [
  [
    'Batches:',
    [
      registerValidateCommand,
      registerPlanCommand,
      registerRunCommand,
      registerStatusCommand,
      registerWatchCommand,
      registerResultsCommand,
      registerDownloadCommand,
      registerReviewCommand,
      registerReportCommand,
      registerRetryFailedCommand,
      registerListCommand,
    ],
  ],
  [
    'Operating:',
    [
      registerPauseCommand,
      registerResumeCommand,
      registerSetConcurrencyCommand,
      registerCancelCommand,
      registerWorkerCommand,
    ],
  ],
  ['Infrastructure:', [registerServerCommand, registerDoctorCommand]],
  ['Development:', [registerSimulatorCommand]],
];

/** The whole program, ready to parse. */
let runtime: typeof import('../worker/runtime') | undefined;

/** After a command: ends the Temporal Runtime it installed, if any (see shutdownRuntime). */
export async function releaseRuntime(): Promise<void> {
  await runtime?.shutdownRuntime();
}

export function buildProgram(): Command {
  const program = new Command('vidbatch')
    .description('Bulk video generation from CSV files, run durably on Temporal.')
    .showHelpAfterError('(add --help for usage)')
    // A usage error (unknown option, bad value) is invalid input: exit 2, as the README documents. Set before
    // the commands are added, so each inherits it.
    .exitOverride((err) => process.exit(exitCodeFor(err)));

  for (const [heading, commands] of GROUPS) {
    program.commandsGroup(heading);
    for (const register of commands) register(program);
  }
  // `help [command]` with the commands about the program itself, not in a group of its own.
  program.commandsGroup('Infrastructure:').helpCommand(true);

  // Before any command runs: logs (WARN by default: the SDK logs every worker state change at INFO) and metrics.
  program.hook('preAction', async (_program, command) => {
    runtime = await import('../worker/runtime');
    const { installRuntime, runtimeSettingsFromEnv } = runtime;
    const settings = runtimeSettingsFromEnv();
    const { metrics } = command.opts<{ metrics?: string }>();
    installRuntime({ ...settings, name: command.name(), ...(metrics ? { metricsAddress: metrics } : {}) });
  });
  return program;
}
