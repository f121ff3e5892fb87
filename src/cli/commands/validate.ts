// `vidbatch validate`.
import { type Command } from 'commander';
import { CsvValidationError } from '../../errors';
import { EXIT } from '../support';

export function registerValidateCommand(program: Command): void {
  program
    .command('validate')
    .summary('Check a CSV: every problem; exits 2 when there is any')
    .description('Check a CSV: prints every problem (file:line [column] reason); exits 2 when there is any.')
    .argument('<csv>', 'input CSV file')
    .option('--json', 'print the report as JSON')
    .action(async (csvPath: string, o: { json?: boolean }) => {
      const { loadCsv } = await import('../../input/csv');
      const parsed = await loadCsv(csvPath);
      if (o.json)
        console.log(
          JSON.stringify({ file: csvPath, rows: parsed.rows.length, problems: parsed.problems }, null, 2),
        );
      else if (parsed.problems.length) console.error(new CsvValidationError(parsed.problems).message);
      else console.log(`${csvPath}: ${parsed.rows.length} rows, no problems`);
      process.exitCode = parsed.problems.length ? EXIT.invalidInput : EXIT.ok;
    });
}
