// `vidbatch download`.
import { dirname, join } from 'node:path';
import { type Command, Option } from 'commander';
import { batchArg, EXIT, numberIn, withSession } from '../support';

export function registerDownloadCommand(program: Command): void {
  program
    .command('download')
    .summary('Download and verify every finished video of a batch')
    .description(
      'Download every finished .mp4 of a batch, verified (status, type, size, MP4 signature, sha256); resumes and never overwrites a verified file.',
    )
    .argument(...batchArg)
    .option('--dir <dir>', 'where to put the videos (default: <manifest folder>/videos)')
    .addOption(
      new Option('--concurrency <n>', 'downloads at once (1-64)')
        .argParser(numberIn({ whole: true, min: 1, max: 64 }))
        .default(4),
    )
    .addOption(
      new Option('--out-root <dir>', 'root of the output folders').env('VIDBATCH_OUT_ROOT').default('out'),
    )
    .action(async (ref: string, o: { dir?: string; concurrency: number; outRoot: string }) => {
      const [{ findManifest }, { resolveBatchId }, { downloadBatch }] = await Promise.all([
        import('../../client/batch-status'),
        import('../../client/batches'),
        import('../../results/download'),
      ]);
      const batchId = await resolveBatchId(ref);
      const manifest = await withSession((s) => findManifest(s.client, batchId, o.outRoot));
      const dir = o.dir ?? join(dirname(manifest), 'videos');
      const reports = await downloadBatch(manifest, dir, o.concurrency);
      const failed = reports.filter((r) => r.error);
      console.log(
        `${reports.length - failed.length} videos verified in ${dir} (${reports.filter((r) => r.reused).length} already there), ${failed.length} failed`,
      );
      for (const f of failed) console.error(`  ${f.rowId}: ${f.error}`);
      const mismatched = reports.filter((r) => r.verification && !r.verification.ok);
      if (mismatched.length)
        console.log(`${mismatched.length} not as asked (downloads.jsonl has the details):`);
      for (const m of mismatched) console.log(`  ${m.rowId}: ${m.verification!.problems.join('; ')}`);
      process.exitCode = failed.length ? EXIT.rowsFailed : EXIT.ok;
    });
}
