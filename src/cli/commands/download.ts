// `vidbatch download`.
import { type Command, Option } from 'commander';
import { DEFAULT_MAX_VIDEO_BYTES } from '../../contract/batch-options';
import { batchArg, EXIT, numberIn, positiveWhole, withBatch } from '../support';

interface DownloadFlags {
  dir?: string;
  concurrency: number;
  outRoot: string;
  maxVideoBytes?: number;
}

export function registerDownloadCommand(program: Command): void {
  program
    .command('download')
    .summary('Download and verify every finished video of a batch not on disk yet')
    .description(
      'Download every finished .mp4 of a batch that is not on disk yet, verified (status, type, size, MP4 signature, sha256) and checked against its row; files the manifest already names (as `run` downloads them) are kept. A URL that answers 403, 404 or 410 is asked for again through its job (GATEWAY_BASE_URL and GATEWAY_API_KEY, a status check: a gateway may give a fresh URL), rows that ended url_expired included. Each video fetched goes into the manifest as soon as it is verified, so `status`, `results` and `review` see it, and Ctrl-C keeps everything fetched so far: running it again fetches only the rest. Resumes, and never overwrites a verified file.',
    )
    .argument(...batchArg)
    .option('--dir <dir>', "where to put videos not on disk yet (default: the batch's output folder)")
    .addOption(
      new Option('--concurrency <n>', 'downloads at once (1-64)')
        .argParser(numberIn({ whole: true, min: 1, max: 64 }))
        .default(4),
    )
    .addOption(
      new Option(
        '--max-video-bytes <n>',
        `largest video downloaded, in bytes (default ${DEFAULT_MAX_VIDEO_BYTES}, 2 GiB)`,
      ).argParser(positiveWhole),
    )
    .addOption(
      new Option('--out-root <dir>', 'root of the output folders').env('VIDBATCH_OUT_ROOT').default('out'),
    )
    .action(async (ref: string, o: DownloadFlags) => {
      const [{ findManifest, localFolderOf }, { previousInput }, { downloadBatch }] = await Promise.all([
        import('../../client/batch-status'),
        import('../../client/rerun'),
        import('../../results/download-batch'),
      ]);
      const { batchId, manifest, strict } = await withBatch(
        ref,
        async (s, batchId) => ({
          batchId,
          manifest: await findManifest(s.client, batchId, o.outRoot),
          strict: (await previousInput(s.client, batchId))?.options.verify === 'strict',
        }),
        o.outRoot,
      );
      const currentUrl = await gatewayAsker();
      const dir = o.dir ?? localFolderOf(manifest, o.outRoot, batchId);
      // Ctrl-C stops the downloads on the way (their .part files resume next time) and starts no other; each
      // video fetched before it is already in the manifest. A second Ctrl-C ends the process at once.
      const abort = new AbortController();
      const onSigint = () => abort.abort();
      process.once('SIGINT', onSigint);
      let reports;
      try {
        reports = await downloadBatch(manifest, {
          dir,
          concurrency: o.concurrency,
          strict,
          signal: abort.signal,
          ...(o.maxVideoBytes !== undefined ? { maxBytes: o.maxVideoBytes } : {}),
          ...(currentUrl ? { currentUrl } : {}),
        });
      } finally {
        process.removeListener('SIGINT', onSigint);
      }
      const failed = reports.filter((r) => r.error);
      const interrupted = reports.filter((r) => r.interrupted).length;
      const reused = reports.filter((r) => r.reused).length;
      const fresh = reports.filter((r) => r.freshUrl).length;
      const onDisk = reports.length - failed.length - interrupted;
      const fetched = onDisk - reused;
      console.log(
        `${onDisk} videos on disk, verified: ${reused} already there, ${fetched} fetched into ${dir}` +
          `${fresh ? ` (${fresh} through a fresh URL from its job)` : ''}; ${failed.length} failed` +
          `${interrupted ? `; ${interrupted} not fetched (interrupted)` : ''}`,
      );
      for (const f of failed) console.error(`  ${f.rowId}: ${f.error}`);
      if (failed.length && !currentUrl)
        console.error(
          'GATEWAY_BASE_URL and GATEWAY_API_KEY are not set: expired URLs were not asked for again through their jobs',
        );
      const mismatched = reports.filter((r) => r.verification && !r.verification.ok);
      if (mismatched.length) console.log(`${mismatched.length} not as asked (the manifest has the details):`);
      for (const m of mismatched) console.log(`  ${m.rowId}: ${m.verification!.problems.join('; ')}`);
      if (interrupted)
        console.error(
          `Interrupted: every video fetched is recorded in the manifest; \`vidbatch download ${ref}\` fetches the other ${interrupted}`,
        );
      process.exitCode = interrupted ? EXIT.interrupted : failed.length ? EXIT.rowsFailed : EXIT.ok;
    });
}

/**
 * The job's current URL, by one status check through the gateway client (a gateway may sign a fresh URL);
 * undefined when the gateway settings are missing, so downloads go on without asking.
 */
async function gatewayAsker(): Promise<((jobId: string) => Promise<string | undefined>) | undefined> {
  const [{ loadGatewaySettings }, { GatewayClient }] = await Promise.all([
    import('../../config'),
    import('../../gateway/client'),
  ]);
  let gateway: InstanceType<typeof GatewayClient>;
  try {
    gateway = new GatewayClient(loadGatewaySettings());
  } catch {
    return undefined;
  }
  return async (jobId) => {
    const job = await gateway.getJob(jobId).catch(() => undefined);
    return job?.status === 'completed' ? job.url : undefined;
  };
}
