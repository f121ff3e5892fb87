// What `plan` and `run --dry-run` print: the rows by model, resolution and duration, what the output root
// already paid for (rows done earlier, videos reused, jobs followed) and the new jobs, with their estimated
// cost when prices are given.
import { join, resolve } from 'node:path';
import type { EnhanceOptions } from '../contract/enhance';
import type { PromptRow } from '../contract/rows';
import { assignRequestKeys } from '../input/request-key';
import type { ParsedCsv } from '../input/csv';
import { plan } from '../input/plan';
import { estimateRows, type Prices } from '../results/prices';
import { FolderPrior } from '../results/prior';
import { RequestIndex } from '../results/request-index';
import { loadStoreSetting } from '../config';
import { isStoreUrl, joinStorePath } from '../store/store-url';
import { batchIdFor } from '../client/batches';
import { estimateLine } from './estimate';

export interface ReusePlan {
  /** Rows an earlier run of this batch finished. */
  doneEarlier: number;
  /** Rows another batch in the output root kept a video for (the same request): recorded at no cost. */
  reused: number;
  /** Rows with a job already made (by this batch or another) that is checked before paying again. */
  followed: number;
  /** Rows another batch's same request ended refused for its content or with its job forgotten: not sent. */
  settled: number;
  /** Rows that will submit a new job. */
  newJobs: number;
}

/** How a run of `rows` as batch `batchId` in `outRoot` would use what the root already paid for. */
export async function reusePlan(
  rows: PromptRow[],
  outRoot: string,
  batchId: string,
  reuse: boolean,
): Promise<{ plan: ReusePlan; newRows: PromptRow[]; root: string }> {
  // With a shared store, a new batch keeps its results there, beside the other batches the index reads.
  const root = loadStoreSetting() ?? outRoot;
  const own = await new FolderPrior(
    isStoreUrl(root) ? joinStorePath(root, batchId) : join(root, batchId),
  ).refresh();
  const index = reuse ? await new RequestIndex(root).refresh(batchId) : undefined;
  const counts: ReusePlan = { doneEarlier: 0, reused: 0, followed: 0, settled: 0, newJobs: 0 };
  const newRows: PromptRow[] = [];
  for (const row of rows) {
    const prior = own.get(row.id);
    if (prior?.status === 'succeeded') counts.doneEarlier += 1;
    else if (prior?.jobId) counts.followed += 1;
    else {
      const found = !prior && row.request ? index?.lookup(row.request, batchId) : undefined;
      if (found?.kept) counts.reused += 1;
      else if (found?.follow) counts.followed += 1;
      else if (found?.settled) counts.settled += 1;
      else {
        counts.newJobs += 1;
        newRows.push(row);
      }
    }
  }
  return { plan: counts, newRows, root };
}

/** Prints the plan of `csv` as JSON on stdout, and the reuse and cost lines on stderr. */
export async function printPlan(
  csv: ParsedCsv,
  /**
   * The gateway account the run would pay on (client/target.ts plannedTarget): it names the batch, and what the
   * root paid for is counted for it. Unknown here: every row is counted as a new job, and the plan says why.
   */
  target: string | undefined,
  o: {
    outRoot?: string;
    fresh?: boolean;
    prices?: Prices;
    /** A run with --enhance: rows to be rewritten are keyed with its settings (input/request-key.ts). */
    enhance?: EnhanceOptions;
    extra?: Record<string, unknown>;
  },
): Promise<void> {
  const outRoot = resolve(o.outRoot || process.env.VIDBATCH_OUT_ROOT || 'out');
  const batchId = target && batchIdFor(csv, { target, root: loadStoreSetting() ?? outRoot });
  if (o.enhance) assignRequestKeys(csv.rows, o.enhance);
  const {
    plan: reuse,
    newRows,
    root,
  } = batchId
    ? await reusePlan(csv.rows, outRoot, batchId, !o.fresh)
    : {
        plan: { doneEarlier: 0, reused: 0, followed: 0, settled: 0, newJobs: csv.rows.length },
        newRows: csv.rows,
        root: outRoot,
      };
  if (!batchId)
    console.error(
      'No gateway here (GATEWAY_BASE_URL, or --simulate): every row is counted as a new job. What an output root ' +
        'already paid for is counted per gateway account.',
    );
  const estimate = o.prices && estimateRows(newRows, o.prices);
  console.log(
    JSON.stringify(
      {
        ...(batchId ? { batchId } : {}),
        ...plan(csv.rows),
        reuse,
        ...(estimate ? { estimate } : {}),
        ...o.extra,
      },
      null,
      2,
    ),
  );
  const earlier = reuse.doneEarlier + reuse.reused + reuse.followed + reuse.settled;
  if (earlier)
    console.error(
      `${reuse.newJobs} new jobs for ${csv.rows.length} rows: ${reuse.doneEarlier} done earlier in this batch, ${reuse.reused} reuse videos other batches in ${root} paid for, ${reuse.followed} check jobs already made` +
        (reuse.settled
          ? `, ${reuse.settled} not sent (the same request was refused for its content, or its job forgotten)`
          : ''),
    );
  if (estimate) console.error(estimateLine(newRows.length, estimate));
}
