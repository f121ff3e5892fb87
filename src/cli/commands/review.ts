// `vidbatch review`.
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { type Command, Option } from 'commander';
import type { ReviewTarget } from '../../review/load';
import { REVIEW_FILE } from '../../review/page';
import { addPriceFlags, pricesFrom } from '../price-flags';
import { ConfigError } from '../../errors';
import { isStoreUrl } from '../../store/store-url';
import { batchArg, EXIT, fail, port, waitForCtrlC, withBatch } from '../support';

export function registerReviewCommand(program: Command): void {
  const command = program
    .command('review')
    .summary('Write (or --serve) a gallery of a batch to mark rows keep or redo')
    .description(
      'Write <out-root>/<batch-id>/review.html: a gallery of the batch (video, prompt, settings, state per row) to mark rows keep or redo and export them as an input CSV; --serve serves it live.',
    )
    .argument(...batchArg)
    .option(
      '--serve',
      'serve the gallery and the videos on 127.0.0.1, updating as rows finish (Ctrl-C stops)',
    )
    .addOption(
      new Option('--port <n>', 'port of --serve (0: any free port)')
        .env('VIDBATCH_REVIEW_PORT')
        .argParser(port)
        .default(8470),
    )
    .addOption(
      new Option('--out-root <dir>', 'root of the output folders').env('VIDBATCH_OUT_ROOT').default('out'),
    );
  addPriceFlags(command).action(
    async (
      ref: string,
      o: { serve?: boolean; port: number; outRoot: string; price?: string[]; prices?: string },
    ) => {
      const [
        { findManifest, localFolderOf },
        { batchHandle },
        { previousInput },
        { reviewData },
        { loadProvider },
      ] = await Promise.all([
        import('../../client/batch-status'),
        import('../../client/batches'),
        import('../../client/rerun'),
        import('../../review/load'),
        import('../../config'),
      ]);
      const prices = await pricesFrom(o);
      // The CSV is read as `run` read it: for this environment's provider (its defaults, what only it takes).
      const provider = await Promise.resolve()
        .then(() => loadProvider())
        .catch(fail);
      const target = await withBatch(
        ref,
        async (s, batchId): Promise<ReviewTarget> => {
          const manifestPath = await findManifest(s.client, batchId, o.outRoot);
          const description = await batchHandle(s.client, batchId)
            .describe()
            .catch(() => undefined);
          // The CSV: the one given, else the one the batch was started with (as its workers saw it).
          const csvPath = existsSync(ref) ? ref : (await previousInput(s.client, batchId))?.csvPath;
          return {
            batchId,
            outDir: dirname(manifestPath),
            pageDir: localFolderOf(manifestPath, o.outRoot, batchId),
            manifestPath,
            csvPath: csvPath && !isStoreUrl(csvPath) ? resolve(csvPath) : undefined,
            ...(prices ? { prices } : {}),
            provider,
            batch: description && {
              workflowStatus: description.status.name,
              startTime: description.startTime,
              closeTime: description.closeTime,
            },
          };
        },
        o.outRoot,
      );
      if (!o.serve) {
        const file = join(target.pageDir, REVIEW_FILE);
        const { reviewPage } = await import('../../review/page');
        const data = await reviewData(target, { pageDir: target.pageDir });
        await mkdir(target.pageDir, { recursive: true });
        await writeFile(file, await reviewPage(data));
        console.log(`${data.rows.length} rows: ${file}`);
        process.exitCode = EXIT.ok;
        return;
      }
      const { serveReview } = await import('../../review/serve');
      const served = await serveReview(target, o.port).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EADDRINUSE') throw err;
        return fail(
          new ConfigError(`--port ${o.port}: the port is in use; choose another (--port 0: any free port)`),
        );
      });
      console.log(`Reviewing ${target.batchId} at ${served.url} (Ctrl-C stops)`);
      await waitForCtrlC();
      await served.close();
    },
  );
}
