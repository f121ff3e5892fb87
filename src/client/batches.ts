// Batches from the client side: the id of a CSV's batch (its content, target and root), start or attach. The
// batch's handle, progress, following and cancelling are batch-handle.ts's; retry-failed.ts starts retries.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { WorkflowExecutionAlreadyStartedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { resumeUpdate } from '../contract/messages';
import { BatchIdAttr, StateAttr } from '../contract/search-attributes';
import type { BatchInput } from '../contract/batch';
import { DEFAULT_BATCH_OPTIONS, concurrencyProblem, type BatchOptions } from '../contract/batch-options';
import { BATCH_ID } from '../contract/target';
import { loadProvider, loadWorkerSettings, targetProvider } from '../config';
import { ConfigError, UnservedBatchError } from '../errors';
import type { ProviderAdapter } from '../gateway/provider';
import { DEFAULT_PROVIDER, providerNamed } from '../gateway/providers';
import { loadCsv, loadValidCsv, type ParsedCsv } from '../input/csv';
import { rowsFileKey, writeRowsFile } from '../input/rows-file';
import { keepNoticeUrls, noticeDestinations } from '../notices/notice-store';
import { putInput, sourceName, type CsvSource } from '../store/inputs';
import { LocalStore } from '../store/local-store';
import { openStore } from '../store/open-store';
import { isStoreUrl } from '../store/store-url';
import { batchWorkflow } from '../workflows';
import { checkSameVersion, getProgress } from './batch-handle';
import { endLateChecks, previousInput, waitForTerminatedSubmits } from './rerun';
import type { Session } from './session';
import { batchTarget, pollersOf, type BatchTarget } from './target';
import { scopeDigest, type BatchScope } from './task-queue';

export {
  batchHandle,
  cancelBatch,
  checkSameVersion,
  followBatch,
  getProgress,
  PROGRESS_QUERY_MS,
  UNSERVED_CANCEL_WAIT_MS,
} from './batch-handle';

/**
 * `batch-<16 hex of the CSV's sha256>-<8 hex of its scope>` (a retry's: of the CSV's sha256 and the batch it
 * retries): a batch is its file, its target and its output root,
 * so a `--simulate` try-out and the real run of one file, or one file run into two roots, are separate batches.
 */
export function batchIdFor(
  csv: Pick<ParsedCsv, 'sha256'>,
  scope: BatchScope | string,
  /** A retry's batch is also what it retries: retrying a retry whose rows all failed again gives the same CSV. */
  retryOf?: string,
): string {
  const hex = typeof scope === 'string' ? scope : scopeDigest(scope, 8);
  const content = retryOf
    ? createHash('sha256').update(`${csv.sha256}\nretry of ${retryOf}`).digest('hex')
    : csv.sha256;
  return `batch-${content.slice(0, 16)}-${hex}`;
}

/**
 * A batch is named by its id or by the CSV it was made from. A CSV names every batch made from it (one per target
 * and root): the one of this process's scope when it is among them, else the latest started, and the others are
 * said. A batch Temporal has forgotten is found by its folder in the output root; one not started yet is the one
 * this process's scope would run.
 */
export async function resolveBatchId(
  ref: string,
  client: Client,
  hint: { scope?: BatchScope; outRoot?: string; log?: (message: string) => void } = {},
): Promise<string> {
  if (BATCH_ID.test(ref)) return ref;
  if (!existsSync(ref))
    throw new Error(`"${ref}" is neither a batch id (batch-<16 hex>-<8 hex>) nor a CSV file`);
  const csv = await loadCsv(ref);
  const prefix = `batch-${csv.sha256.slice(0, 16)}-`;
  const found = new Map<string, { started: number; target?: string }>();
  for await (const w of client.workflow.list({ query: `WorkflowType = '${batchWorkflow.name}'` }))
    if (w.workflowId.startsWith(prefix) && !found.has(w.workflowId))
      found.set(w.workflowId, {
        started: w.startTime.getTime(),
        ...(typeof w.memo?.target === 'string' ? { target: w.memo.target } : {}),
      });
  if (!found.size) {
    const root = hint.outRoot ?? process.env.VIDBATCH_OUT_ROOT ?? 'out';
    for (const name of await readdir(root).catch(() => [] as string[]))
      if (name.startsWith(prefix) && BATCH_ID.test(name)) found.set(name, { started: 0 });
  }
  const own = hint.scope && batchIdFor(csv, hint.scope);
  // Not started yet: the batch this environment would run (`review --serve` before `run` waits for its rows).
  if (!found.size && own) return own;
  if (!found.size)
    throw new Error(`no batch of ${ref} is known here (run it first, or name the batch by its id)`);
  const ids = [...found.keys()].sort((a, b) => found.get(b)!.started - found.get(a)!.started);
  const chosen = own && found.has(own) ? own : ids[0]!;
  if (ids.length > 1)
    (hint.log ?? ((m) => console.error(m)))(
      `${ref} has ${ids.length} batches (${ids.map((id) => `${id} for ${found.get(id)!.target ?? 'an unknown target'}`).join(', ')}): ` +
        `using ${chosen}; name another by its id`,
    );
  return chosen;
}

/**
 * `outDir` and `downloadDir` are ROOTS shared by batches: each batch writes its manifest and jobs journal in
 * `<outDir>/<batchId>/` and its videos in `<downloadDir>/<batchId>/`, so batches never mix. Without `outDir`
 * the worker's root (`vidbatch worker --out`, default `out`) is used the same way; without `downloadDir` the
 * videos go into the batch's own output folder, unless `download` is false.
 */
export interface StartBatchOptions extends Partial<Omit<BatchOptions, 'poll' | 'notify'>> {
  poll?: Partial<BatchOptions['poll']>;
  /** Where notices go (`run --notify`): URLs, kept beside the rows file; the batch carries references to them. */
  notify?: string[];
  /** This batch retries the failed rows of that one. */
  retryOf?: string;
  /** retry-failed: the original batch's output folder, whose jobs are checked before paying again. */
  priorOutDir?: string;
}

/**
 * A file edited while its batch runs makes a new batch; the old one pauses when it next reads the file, or, when
 * its CSV was put in the store, runs on from that copy. Says so, and what to do with it, for every batch still
 * running from the same path.
 */
async function sayOlderBatchesOf(
  session: Session,
  csvPath: string,
  batchId: string,
  log: (message: string) => void,
): Promise<void> {
  try {
    const query = `WorkflowType = '${batchWorkflow.name}' AND ExecutionStatus = 'Running'`;
    for await (const w of session.client.workflow.list({ query })) {
      if (w.workflowId === batchId || w.memo?.csvPath !== csvPath) continue;
      const stored = typeof w.memo?.csvRef === 'string' && isStoreUrl(w.memo.csvRef);
      log(
        `${w.workflowId} was started from ${csvPath} before it changed and is still running: ` +
          (stored
            ? 'it reads its copy of the file in the store, so it runs on to its end. '
            : 'it pauses when it next reads the file (its rows in flight finish). ') +
          `Cancel it (\`vidbatch cancel ${w.workflowId}\`): ${batchId} checks the jobs it made for unchanged rows and pays only for what changed.`,
      );
    }
  } catch {
    // Advice only: a server without visibility queries still runs the batch.
  }
}

/** The latest batch of `csv` for `target` whose results are in a shared store, if any. */
async function keptInStore(
  session: Session,
  csv: Pick<ParsedCsv, 'sha256'>,
  target: string,
): Promise<{ batchId: string; outDir: string } | undefined> {
  const prefix = `batch-${csv.sha256.slice(0, 16)}-`;
  try {
    for await (const w of session.client.workflow.list({ query: `WorkflowType = '${batchWorkflow.name}'` })) {
      if (!w.workflowId.startsWith(prefix) || w.memo?.target !== target) continue;
      if (typeof w.memo?.csvRef !== 'string' || !isStoreUrl(w.memo.csvRef)) continue;
      const outDir = (await previousInput(session.client, w.workflowId))?.options.outDir;
      if (outDir && isStoreUrl(outDir)) return { batchId: w.workflowId, outDir };
    }
  } catch {
    // Advice only: a server without visibility queries still runs the batch.
  }
  return undefined;
}

/** A batch's own folder under a shared root: `<root>/<batchId>`. */
export function batchDir(root: string, batchId: string): string {
  return resolve(root, batchId);
}

/** Drops undefined values, so an unset flag never overrides a default. */
export function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** "concurrency 3 -> 5"-style differences between a batch's options and those of its re-run. */
function changedOptions(before: BatchOptions, after: BatchOptions): string[] {
  const flat = (o: BatchOptions): Record<string, unknown> => {
    const { poll, ...rest } = o;
    // Notice URLs (a batch's from before references carries them) are shown by their references only.
    rest.notify &&= noticeDestinations(undefined, rest.notify).to;
    return { ...rest, ...Object.fromEntries(Object.entries(poll).map(([k, v]) => [`poll.${k}`, v])) };
  };
  const a = flat(before);
  const b = flat(after);
  return [...new Set([...Object.keys(a), ...Object.keys(b)])]
    .filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]))
    .map((k) => `${k} ${JSON.stringify(a[k]) ?? 'unset'} -> ${JSON.stringify(b[k]) ?? 'unset'}`);
}

export interface StartedBatch {
  handle: WorkflowHandle<typeof batchWorkflow>;
  batchId: string;
  /** The target it runs for, and where that came from. */
  target: BatchTarget;
  /** The batch was already running or completed: this attached to it. */
  attached: boolean;
  /** The task queue of the running batch this attached to, when it is not this process's: only followed here. */
  runsOn?: string;
}

/**
 * The rows are read with the defaults of the provider they are sent to: one that is not the provider the target
 * names (the workers' GATEWAY_PROVIDER differs from this process's) would send other values than the manifest
 * says. A target without a provider in front is the default's, or one made by hand for a custom adapter.
 */
function checkProvider(target: BatchTarget, provider: ProviderAdapter, taskQueue: string): void {
  const named = targetProvider(target.target);
  const builtIn = providerNamed(provider.name) === provider;
  if (named === undefined ? !builtIn || provider === DEFAULT_PROVIDER : named === provider.name) return;
  const theirs = named ?? DEFAULT_PROVIDER.name;
  throw new ConfigError(
    `the batch would run for ${target.target}` +
      (target.from === 'declared' ? ` (the target the workers on task queue "${taskQueue}" declare)` : '') +
      `, a ${theirs} target, but its rows were read for ${provider.name} (GATEWAY_PROVIDER): set GATEWAY_PROVIDER=${theirs} here, as its workers have it`,
  );
}

/** Validates the CSV (nothing is submitted from a file with errors), then starts its batch or attaches to it. */
export async function startBatch(
  session: Session,
  /** A file, or (with VIDBATCH_STORE) an object the caller opened and parsed. */
  source: CsvSource,
  options: StartBatchOptions = {},
  /** The file already parsed and validated by the caller, so it is not read twice. */
  parsed?: ParsedCsv,
  log: (message: string) => void = (m) => console.error(m),
): Promise<StartedBatch> {
  if (!parsed && typeof source !== 'string') throw new Error('startBatch: an object source comes parsed');
  // The provider whose defaults the rows get: this process's worker's, else GATEWAY_PROVIDER's.
  const provider = session.provider ?? loadProvider();
  const readFor = parsed?.provider ?? DEFAULT_PROVIDER.name;
  if (parsed && readFor !== provider.name)
    throw new Error(
      `startBatch: the CSV was read for ${readFor}, the session sends to ${provider.name}: read it with { provider }`,
    );
  const csv = parsed ?? (await loadValidCsv(source as string, { provider }));
  const csvPath = sourceName(source, resolve);
  const { outRoot, store: storeUrl } = loadWorkerSettings();
  const target = await batchTarget(session);
  checkProvider(target, provider, session.taskQueue);
  // The root the batch's folder goes in: --out-root, else the shared store, else the worker's.
  const root = options.outDir ?? storeUrl ?? outRoot;
  const batchId = batchIdFor(csv, { target: target.target, root }, options.retryOf);
  // Without VIDBATCH_STORE, a batch of this file and target kept in the store is not started again here as a new
  // batch of the local root (which would pay for every row again): said, nothing sent.
  if (!storeUrl && !options.outDir) {
    const kept = await keptInStore(session, csv, target.target);
    if (kept)
      throw new ConfigError(
        `${kept.batchId} keeps its journal and results in ${kept.outDir}: set VIDBATCH_STORE (and the store's credentials) to run it again`,
      );
  }
  const { retryOf, priorOutDir, notify, ...rest } = options;
  const previous = await session.client.workflow
    .getHandle(batchId)
    .describe()
    .catch(() => undefined);
  if (previous) checkSameVersion(previous, session.taskQueue);
  // Running on another task queue (started with another VIDBATCH_TASK_QUEUE): its own workers run it; this
  // process only follows it, and never runs its rows itself.
  if (previous?.status.name === 'RUNNING' && previous.taskQueue !== session.taskQueue) {
    if ((await pollersOf(session, previous.taskQueue)).length === 0)
      throw new UnservedBatchError(batchId, previous.taskQueue);
    const handle = session.client.workflow.getHandle<typeof batchWorkflow>(batchId);
    return { handle, batchId, target, attached: true, runsOn: previous.taskQueue };
  }
  // Failed, cancelled or terminated batches may be started again (the new run continues from what the earlier
  // ones recorded: rows that succeeded are not submitted, known jobs are checked); running or completed ones
  // are attached to.
  const attached = !!previous && ['RUNNING', 'COMPLETED', 'CONTINUED_AS_NEW'].includes(previous.status.name);
  const before = previous && !attached ? await previousInput(session.client, batchId) : undefined;
  // Options are resolved here, once: a flag given, else the batch's stored options (a re-run keeps its own;
  // what was given again and differs is applied, and said), else the defaults. Workflows apply none.
  const stored: Partial<BatchOptions> = before?.options ?? {};
  const notices = noticeDestinations(notify, stored.notify);
  const batchOptions: BatchOptions = {
    ...DEFAULT_BATCH_OPTIONS,
    ...definedOnly(stored),
    ...definedOnly(rest),
    poll: {
      ...DEFAULT_BATCH_OPTIONS.poll,
      ...definedOnly(stored.poll ?? {}),
      ...definedOnly(options.poll ?? {}),
    },
    ...(options.outDir ? { outDir: batchDir(options.outDir, batchId) } : {}),
    ...(options.downloadDir ? { downloadDir: batchDir(options.downloadDir, batchId) } : {}),
    // A retry is a deliberate regeneration: it never reuses another batch's video for its rows.
    ...(retryOf ? { reuse: false } : {}),
  };
  if (notices.to) batchOptions.notify = notices.to;
  else delete batchOptions.notify;
  // --no-download given to a batch that had a download root: no root is left to suggest otherwise.
  if (batchOptions.download === false) delete batchOptions.downloadDir;
  // Whether a job can be stopped is the provider's (its target's), never a flag.
  if (provider.cancel) batchOptions.stopJobs = true;
  else delete batchOptions.stopJobs;
  const shared = storeUrl ? await openStore(storeUrl, outRoot) : undefined;
  // With a shared store, a new batch keeps its journal and results there, named by URL (a re-run keeps its
  // batch's place, where its journal is).
  if (shared && !previous && !batchOptions.outDir) batchOptions.outDir = shared.urlOf(batchId);
  if (!shared && batchOptions.outDir && isStoreUrl(batchOptions.outDir))
    throw new ConfigError(
      `${batchId} keeps its journal and results in ${batchOptions.outDir}: set VIDBATCH_STORE (and the store's credentials) to run it again`,
    );
  const windowProblem = concurrencyProblem(batchOptions.concurrency);
  if (windowProblem) throw new ConfigError(`--concurrency ${windowProblem}`);
  if (before) {
    const changed = changedOptions(before.options, batchOptions);
    log(
      `${batchId} was ${previous!.status.name.toLowerCase()}: running it again with its own options` +
        (changed.length ? `, except ${changed.join(', ')} (given again)` : ''),
    );
    const journalDir = before.options.outDir ?? join(outRoot, batchId);
    await waitForTerminatedSubmits(
      session.client,
      batchId,
      previous!,
      before.options.submitTimeoutMs,
      log,
      journalDir,
    );
    // Prompts of the closed batch that still check their jobs for late videos hold their rows' workflow ids.
    await endLateChecks(session.client, batchId).catch(() => 0);
  }
  // Workers read the rows by position from the rows file (input/rows-file.ts); one that finds it missing writes
  // it from the CSV. With a shared store (VIDBATCH_STORE), the CSV goes there too and the batch names it by URL,
  // so workers need nothing of this machine's; else the rows file goes beside the batch's folder.
  let csvRef = csvPath;
  if (!attached) {
    if (shared) csvRef = await putInput(shared, source, csv.sha256);
    else if (typeof source !== 'string')
      throw new ConfigError(`${csvPath}: a CSV in a bucket needs VIDBATCH_STORE`);
    const store = shared ?? new LocalStore(dirname(resolve(batchOptions.outDir ?? join(outRoot, batchId))));
    const key = rowsFileKey(csv.sha256, batchOptions.enhance, provider);
    await writeRowsFile(store, key, csv.sha256, csv.rows, batchOptions.enhance).catch((err: Error) =>
      log(`could not write ${store.urlOf(key)} (${err.message}): the workers write it from the CSV`),
    );
    // Notice URLs are secrets (a Slack URL's path is its key): kept here, read by the worker that delivers.
    await keepNoticeUrls(store, notices.keep).catch((err: Error) => {
      throw new ConfigError(`--notify: the notice URLs cannot be kept in ${store.url}: ${err.message}`);
    });
  }
  const input: BatchInput = {
    batchId,
    csvPath: csvRef,
    csvSha256: csv.sha256,
    totalRows: csv.rows.length,
    options: batchOptions,
    ...(retryOf ? { retryOf } : {}),
    ...(priorOutDir ? { priorOutDir: isStoreUrl(priorOutDir) ? priorOutDir : resolve(priorOutDir) } : {}),
  };
  try {
    const handle = await session.client.workflow.start(batchWorkflow, {
      workflowId: batchId,
      taskQueue: session.taskQueue,
      args: [input],
      // Same file again: attach to the running batch; a finished batch is never run twice.
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      typedSearchAttributes: [
        { key: BatchIdAttr, value: batchId },
        { key: StateAttr, value: 'running' },
      ],
      staticSummary: `vidbatch: ${csv.rows.length} prompts from ${typeof source === 'string' ? source : source.url}`,
      staticDetails:
        `**CSV:** ${csvPath}\n\n**sha256:** ${csv.sha256}\n\n**Target:** ${target.target}` +
        `\n\n**Window:** ${batchOptions.concurrency} prompts` +
        (retryOf ? `\n\n**Retries the failed rows of:** ${retryOf}` : ''),
      memo: {
        csvPath,
        target: target.target,
        ...(csvRef !== csvPath ? { csvRef } : {}),
        ...(retryOf ? { retryOf } : {}),
      },
    });
    if (!attached) await sayOlderBatchesOf(session, csvPath, batchId, log);
    else if (previous?.status.name === 'RUNNING' && session.worker) await resumeRefusedKey(handle, log);
    return { handle, batchId, target, attached };
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    return {
      handle: session.client.workflow.getHandle<typeof batchWorkflow>(batchId),
      batchId,
      target,
      attached: true,
    };
  }
}

/**
 * A batch paused because the gateway refused its key goes on when its file is run again: the key is a
 * credential, not the batch's identity, and this process brings its own (a new one, or the old one fixed). A key
 * that is still refused pauses the batch again after one request.
 */
async function resumeRefusedKey(
  handle: WorkflowHandle<typeof batchWorkflow>,
  log: (message: string) => void,
): Promise<void> {
  const progress = await getProgress(handle);
  if (progress?.pauseKind !== 'key') return;
  await handle.executeUpdate(resumeUpdate);
  log(
    `${handle.workflowId} was paused: ${progress.pausedReason}. Resumed with this process's key: its rows go on ` +
      '(a key still refused pauses it again after one request)',
  );
}
