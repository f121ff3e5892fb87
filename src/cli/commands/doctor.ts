// `vidbatch doctor`.
import { type Command } from 'commander';
import { EXIT } from '../support';

export function registerDoctorCommand(program: Command): void {
  program
    .command('doctor')
    .summary('Check gateway settings, key and models, Temporal, and a CSV')
    .description(
      "Check before an overnight run: gateway settings (GATEWAY_PROVIDER), the key with one cheap call (the models list, or the provider's account), Temporal, and the CSV.",
    )
    .argument('[csv]', 'input CSV to check too')
    .option('--json', 'print as JSON')
    .action(async (csvPath: string | undefined, o: { json?: boolean }) => {
      const { runDoctor } = await import('../doctor');
      const checks = await runDoctor(process.env, csvPath);
      if (o.json) console.log(JSON.stringify(checks, null, 2));
      else for (const c of checks) console.log(`${c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.detail}`);
      process.exitCode = checks.every((c) => c.ok) ? EXIT.ok : EXIT.invalidInput;
    });
}
