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
      "Download every finished .mp4 of a batch that is not on disk yet, verified (status, type, size, MP4 signature, sha256) and checked against its row; files the manifest already names (as `run` downloads them) are kept. A URL that answers 403, 404 or 410 is asked for again through its job (GATEWAY_BASE_URL and GATEWAY_API_KEY, a status check: a gateway may give a fresh URL), rows that ended url_expired included. The jobs of rows that ended deadline_exceeded or cancelled are asked too, unless a worker checks them: a video that arrived late is kept as the row's new state. Each video fetched goes into the manifest as soon as it is verified, so `status`, `results` and `review` see it, and Ctrl-C keeps everything fetched so far: running it again fetches only the rest. Resumes, and never overwrites a verified file.",
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
      const [
        { findManifest, lateChecksServed, localFolderOf },
        { endLateChecksOf, previousInput },
        { downloadBatch },
      ] = await Promise.all([
        import('../../client/batch-status'),
        import('../../client/rerun'),
        import('../../results/download-batch'),
      ]);
      const { batchId, manifest, strict, served } = await withBatch(
        ref,
        async (s, batchId) => ({
          batchId,
          manifest: await findManifest(s.client, batchId, o.outRoot),
          strict: (await previousInput(s.client, batchId))?.options.verify === 'strict',
          // Rows whose late checks a worker makes now: left to it (both would fetch the same file).
          served: await lateChecksServed(s, batchId).catch(() => new Set<string>()),
        }),
        o.outRoot,
      );
      const gateway = await gatewayAsker();
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
          ...(gateway ? { currentUrl: gateway.currentUrl, auth: gateway.auth } : {}),
          late: { served },
        });
      } finally {
        process.removeListener('SIGINT', onSigint);
      }
      const failed = reports.filter((r) => r.error);
      const interrupted = reports.filter((r) => r.interrupted).length;
      const reused = reports.filter((r) => r.reused).length;
      const fresh = reports.filter((r) => r.freshUrl).length;
      const onDisk = reports.filter((r) => r.file && !r.error).length;
      const fetched = onDisk - reused;
      const arrived = reports.filter((r) => r.late === 'arrived').map((r) => r.rowId);
      console.log(
        `${onDisk} videos on disk, verified: ${reused} already there, ${fetched} fetched into ${dir}` +
          `${fresh ? ` (${fresh} through a fresh URL from its job)` : ''}; ${failed.length} failed` +
          `${interrupted ? `; ${interrupted} not fetched (interrupted)` : ''}`,
      );
      const none = reports.filter((r) => r.late === 'none').length;
      const servedRows = reports.filter((r) => r.late === 'served').length;
      if (arrived.length || none || servedRows)
        console.log(
          `late videos (rows that ended deadline_exceeded or cancelled with a job): ${arrived.length} arrived and kept` +
            `${none ? `, ${none} with no video yet` : ''}` +
            `${servedRows ? `, ${servedRows} checked by the workers (they keep any that arrives)` : ''}`,
        );
      // Kept here: the prompts still checking those jobs (on a server no worker serves now) stop, so none
      // fetches the video again when a worker comes back.
      if (arrived.length)
        await withBatch(
          batchId,
          (s) => endLateChecksOf(s.client, batchId, arrived, 'vidbatch download kept its late video'),
          o.outRoot,
        ).catch(() => undefined);
      for (const f of failed) console.error(`  ${f.rowId}: ${f.error}`);
      if (failed.length && !gateway)
        console.error(
          'GATEWAY_BASE_URL and GATEWAY_API_KEY are not set: expired URLs were not asked for again through their jobs',
        );
      if (!gateway) {
        const { summarizeManifest } = await import('../../results/manifest');
        const { lateJobs } = await summarizeManifest(manifest).catch(() => ({ lateJobs: 0 }));
        if (lateJobs)
          console.error(
            `GATEWAY_BASE_URL and GATEWAY_API_KEY are not set: the jobs of ${lateJobs} row(s) that ended deadline_exceeded or cancelled were not asked for a late video`,
          );
      }
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
 * The job's current URL, by one status check through the gateway client (a gateway may sign a fresh URL),
 * and the key's headers for a provider that serves its videos itself; undefined when the gateway settings
 * are missing, so downloads go on without asking.
 */
async function gatewayAsker() {
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
  return {
    currentUrl: async (jobId: string) => {
      const job = await gateway.getJob(jobId).catch(() => undefined);
      return job?.status === 'completed' ? job.url : undefined;
    },
    auth: () => gateway.videoAuth(),
  };
}
