// The `vidbatch` executable: parses the command line with the program (program.ts) and is the last-resort
// handler: an error no command handled is printed and ends the process with its exit code (exitCodeFor).
import { exitCodeFor } from '../errors';
import { buildProgram, releaseRuntime } from './program';

buildProgram()
  .parseAsync(process.argv)
  .catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exitCode = process.exitCode || exitCodeFor(err);
  })
  .finally(releaseRuntime);
