// `vidbatch report`: the morning-after page of a batch, from its folder alone (src/report/). It never opens a
// Temporal session: a batch the server forgot, or a server that is down, still has its report.
import { type Command, Option } from 'commander';
import { addPriceFlags, pricesFrom } from '../price-flags';
import { EXIT, fail } from '../support';

interface ReportFlags {
  out?: string;
  outRoot: string;
  json?: boolean;
  price?: string[];
  prices?: string;
}

export function registerReportCommand(program: Command): void {
  const command = program
    .command('report')
    .summary('Write a one-page HTML report of a batch: counts, spend, a chart, failures to retry')
    .description(
      "Write <out-root>/<batch-id>/report.html: one self-contained page with the batch's counts and spend ledger, a chart of rows finished, jobs in flight and submits sent again over time, failures by error code with their rows and the command that retries them, late arrivals, rows reused from other batches, and links into the review gallery. Reads only the batch's folder (manifest.jsonl, jobs.jsonl), never Temporal: it works offline and for a batch the server has forgotten.",
    )
    .argument('<batch>', 'batch id (or its start), or the CSV the batch was made from')
    .option('--out <file>', 'where to write the page (default: report.html in the batch folder)')
    .addOption(
      new Option('--out-root <dir>', 'root of the output folders').env('VIDBATCH_OUT_ROOT').default('out'),
    )
    .option('--json', "print the report's facts as JSON (the page is written too)");
  addPriceFlags(command).action(async (ref: string, o: ReportFlags, cmd: Command) => {
    const [{ findBatchFolder }, { shellWord }, { writeReport }] = await Promise.all([
      import('../../report/batch-folder'),
      import('../../report/report-data'),
      import('../../report/write-report'),
    ]);
    const prices = await pricesFrom(o);
    const found = await findBatchFolder(ref, { outRoot: o.outRoot }).catch(fail);
    // A root given on the command line is given to the commands the page prints too.
    const rootFlag =
      cmd.getOptionValueSource('outRoot') === 'cli' ? ` --out-root ${shellWord(o.outRoot)}` : '';
    const { data, file } = await writeReport({
      batchId: found.batchId,
      folder: found.folder,
      pageDir: found.pageDir,
      ...(o.out ? { file: o.out } : {}),
      ...(prices ? { prices } : {}),
      commandFlags: rootFlag,
    });
    if (o.json) console.log(JSON.stringify({ ...data, page: file }, null, 2));
    else {
      const c = data.counts;
      const extras = [
        c.noOutcome && `${c.noOutcome} with no outcome yet`,
        c.reused && `${c.reused} reused`,
        c.arrivedLate && `${c.arrivedLate} arrived late`,
      ].filter(Boolean);
      console.log(
        `${data.batchId}: ${c.succeeded} succeeded, ${c.failed} failed of ${c.rows} rows` +
          (extras.length ? ` (${extras.join(', ')})` : ''),
      );
      console.log(data.ledgerLine);
      for (const f of data.failures)
        console.log(`  ${f.code ?? '(no error code)'}: ${f.rows.length} rows; ${f.retryCommand}`);
      console.log(`Report: ${file}`);
    }
    process.exitCode = EXIT.ok;
  });
}
