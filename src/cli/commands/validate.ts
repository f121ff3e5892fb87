// `vidbatch validate`.
import { type Command } from 'commander';
import { CsvValidationError } from '../../errors';
import { EXIT, fail } from '../support';

export function registerValidateCommand(program: Command): void {
  program
    .command('validate')
    .summary('Check a CSV: every problem; exits 2 when there is any')
    .description('Check a CSV: prints every problem (file:line [column] reason); exits 2 when there is any.')
    .argument('<csv>', 'input CSV file')
    .option('--json', 'print the report as JSON')
    .action(async (csvPath: string, o: { json?: boolean }) => {
      const [{ loadCsv }, { loadProvider }] = await Promise.all([
        import('../../input/csv'),
        import('../../config'),
      ]);
      // The rows as the provider would get them: its defaults filled in, what it cannot take a problem.
      const provider = await Promise.resolve()
        .then(() => loadProvider())
        .catch(fail);
      const parsed = await loadCsv(csvPath, { provider });
      if (o.json)
        console.log(
          JSON.stringify({ file: csvPath, rows: parsed.rows.length, problems: parsed.problems }, null, 2),
        );
      else if (parsed.problems.length) console.error(new CsvValidationError(parsed.problems).message);
      else console.log(`${csvPath}: ${parsed.rows.length} rows, no problems`);
      process.exitCode = parsed.problems.length ? EXIT.invalidInput : EXIT.ok;
    });
}
