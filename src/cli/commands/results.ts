// `vidbatch results`.
import { dirname } from 'node:path';
import { type Command, Option } from 'commander';
import { addPriceFlags, pricesFrom } from '../price-flags';
import { batchArg, withBatch } from '../support';

interface ResultsFlags {
  format: 'csv' | 'jsonl';
  dir?: string;
  outRoot: string;
  json?: boolean;
  price?: string[];
  prices?: string;
}

export function registerResultsCommand(program: Command): void {
  const command = program
    .command('results')
    .summary("Export a batch's succeeded and failed rows; print its spend ledger")
    .description(
      "Export a batch's manifest as succeeded and failed files; the failed CSV is a valid input CSV. Prints the spend ledger: every job the gateway made for the batch.",
    )
    .argument(...batchArg)
    .addOption(new Option('--format <fmt>', 'file format').choices(['csv', 'jsonl']).default('csv'))
    .option('--dir <dir>', 'where to write (default: next to the manifest)')
    .addOption(
      new Option('--out-root <dir>', 'root of the output folders').env('VIDBATCH_OUT_ROOT').default('out'),
    )
    .option('--json', 'print a summary as JSON');
  addPriceFlags(command).action(async (ref: string, o: ResultsFlags) => {
    const [
      { findManifest, localFolderOf },
      { batchHandle, getProgress },
      { previousInput },
      { exportResults, leftOutLines },
      { verificationLines },
      { computeLedger, formatLedger },
    ] = await Promise.all([
      import('../../client/batch-status'),
      import('../../client/batches'),
      import('../../client/rerun'),
      import('../../results/export'),
      import('../../results/verification-summary'),
      import('../../results/ledger'),
    ]);
    const prices = await pricesFrom(o);
    const { batchId, manifest, rows } = await withBatch(
      ref,
      async (s, batchId) => {
        const handle = batchHandle(s.client, batchId);
        const state = (await handle.describe().catch(() => undefined))?.status.name;
        // The batch's row count for the ledger: its progress, its result, else its input.
        const total =
          state === 'RUNNING'
            ? (await getProgress(handle))?.total
            : state === 'COMPLETED'
              ? (await handle.result()).total
              : (await previousInput(s.client, batchId))?.totalRows;
        return { batchId, manifest: await findManifest(s.client, batchId, o.outRoot), rows: total };
      },
      o.outRoot,
    );
    const exported = await exportResults(
      manifest,
      o.dir ?? localFolderOf(manifest, o.outRoot, batchId),
      o.format,
    );
    const ledger = await computeLedger(dirname(manifest), { rows, prices });
    if (o.json) console.log(JSON.stringify({ ...exported, ledger }, null, 2));
    else {
      console.log(
        `${exported.succeeded} succeeded, ${exported.failed} failed:\n${exported.files.map((f) => `  ${f}`).join('\n')}\n${formatLedger(ledger)}`,
      );
      for (const line of verificationLines(exported.verification)) console.log(line);
      const where = 'left out of failed.csv (they are in left-out.csv)';
      for (const line of leftOutLines(exported.leftOut, batchId, where)) console.log(line);
    }
  });
}
