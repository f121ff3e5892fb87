// The `vidbatch` command: the program, its commands (each in commands/<name>.ts, parsing its flags and
// calling the modules that do the work), the runtime set-up before any command, and the last-resort handler.
import { Command } from 'commander';
import { OtherVersionBatchError } from '../errors';
import { installRuntime, runtimeSettingsFromEnv } from '../worker/runtime';
import { registerCancelCommand } from './commands/cancel';
import { registerDoctorCommand } from './commands/doctor';
import { registerDownloadCommand } from './commands/download';
import { registerListCommand } from './commands/list';
import { registerPauseCommand } from './commands/pause';
import { registerPlanCommand } from './commands/plan';
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
import { EXIT } from './support';

const program = new Command('vidbatch')
  .description('Bulk video generation from CSV files, run durably on Temporal.')
  .showHelpAfterError('(add --help for usage)')
  // A usage error (unknown option, bad value) is invalid input: exit 2, as the README documents. Set before the
  // commands are added, so each inherits it.
  .exitOverride((err) => {
    process.exit(/^commander\.(help|helpDisplayed|version)$/.test(err.code) ? err.exitCode : 2);
  });

// In the order `vidbatch --help` lists them.
for (const register of [
  registerServerCommand,
  registerSimulatorCommand,
  registerValidateCommand,
  registerRunCommand,
  registerWorkerCommand,
  registerStatusCommand,
  registerWatchCommand,
  registerPauseCommand,
  registerResumeCommand,
  registerSetConcurrencyCommand,
  registerCancelCommand,
  registerListCommand,
  registerResultsCommand,
  registerDownloadCommand,
  registerReviewCommand,
  registerRetryFailedCommand,
  registerDoctorCommand,
  registerPlanCommand,
]) {
  register(program);
}

// Before any command runs: logs (WARN by default: the SDK logs every worker state change at INFO) and metrics.
program.hook('preAction', (_program, command) => {
  const settings = runtimeSettingsFromEnv();
  const { metrics } = command.opts<{ metrics?: string }>();
  installRuntime({ ...settings, name: command.name(), ...(metrics ? { metricsAddress: metrics } : {}) });
});

program.parseAsync(process.argv).catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exitCode =
    process.exitCode || (err instanceof OtherVersionBatchError ? EXIT.invalidInput : EXIT.error);
});
