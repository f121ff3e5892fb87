// Exports of a batch's manifest: succeeded and failed files, and the failed rows as a valid input CSV.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'csv-stringify/sync';
import { isContentRefusal, JOB_GONE_CODE, type PromptResult } from '../contract/prompt';
import { neutralizeTable } from '../input/csv-formula';
import { readManifest } from './manifest';
import { summarizeVerification, verificationCell, type VerificationSummary } from './verification-summary';

/**
 * The columns of an input CSV that reproduce a row exactly (input.* and parameters.* included), as values:
 * writers pass them through csvText, which neutralises formulas.
 */
export function inputRows(
  results: Pick<PromptResult, 'rowId' | 'prompt' | 'originalPrompt' | 'model' | 'input' | 'parameters'>[],
): string[][] {
  // A rewritten row keeps its original beside it: run again, it is sent as it is (never rewritten twice).
  const original = results.some((r) => r.originalPrompt !== undefined);
  const inputKeys = [...new Set(results.flatMap((r) => Object.keys(r.input ?? {})))]
    .filter((k) => k !== 'prompt')
    .sort();
  const paramKeys = [...new Set(results.flatMap((r) => Object.keys(r.parameters ?? {})))]
    .filter((k) => k !== 'resolution' && k !== 'duration')
    .sort();
  const cell = (v: unknown) => (v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v));
  const header = [
    'id',
    'prompt',
    ...(original ? ['original_prompt'] : []),
    'model',
    'resolution',
    'duration',
    ...inputKeys.map((k) => `input.${k}`),
    ...paramKeys.map((k) => `parameters.${k}`),
  ];
  return [
    header,
    ...results.map((r) => [
      r.rowId,
      r.prompt,
      ...(original ? [r.originalPrompt ?? ''] : []),
      r.model,
      cell(r.parameters?.resolution),
      cell(r.parameters?.duration),
      ...inputKeys.map((k) => cell(r.input?.[k])),
      ...paramKeys.map((k) => cell(r.parameters?.[k])),
    ]),
  ];
}

/** A CSV file's text, every cell a spreadsheet would run as a formula prefixed with `'` (input/csv-formula.ts). */
export function csvText(rows: string[][]): string {
  return stringify(neutralizeTable(rows));
}

const RESULT_COLUMNS = [
  'rowId',
  'line',
  'status',
  'prompt',
  'originalPrompt',
  'model',
  'jobId',
  'url',
  'errorCode',
  'errorMessage',
  'attempts',
  'polls',
  'submittedAt',
  'finishedAt',
] as const;

/**
 * Failed rows that neither `failed.csv` nor a `retry-failed` without `--code` takes, by code, and why: sent again
 * unchanged they would be paid again by accident. `retry-failed --code <code>` sends them, deliberately.
 */
export interface LeftOut {
  code: string;
  rows: number;
  why: string;
}

/** Why a failed row with this code is left out (LeftOut), or undefined when it is not. */
export function leftOutReason(code: string | undefined): string | undefined {
  if (isContentRefusal(code))
    return 'the gateway refused their content; sent unchanged it would refuse it again';
  if (code === JOB_GONE_CODE)
    return 'the gateway no longer knows their job, which may have finished and been billed';
  return undefined;
}

/** The left-out rows of `failed`, grouped by code, in order of first appearance. */
function leftOutOf(failed: PromptResult[]): LeftOut[] {
  const byCode = new Map<string, LeftOut>();
  for (const r of failed) {
    const why = leftOutReason(r.errorCode);
    if (!why) continue;
    const code = r.errorCode!;
    const group = byCode.get(code) ?? { code, rows: 0, why };
    group.rows += 1;
    byCode.set(code, group);
  }
  return [...byCode.values()];
}

/** "2 row(s) left out ...: <why> (<code>); `vidbatch retry-failed <batch> --code <code>` sends them" per code. */
export function leftOutLines(leftOut: LeftOut[], batchId: string, where: string): string[] {
  return leftOut.map(
    (l) =>
      `${l.rows} row(s) ${where}: ${l.why} (${l.code}); \`vidbatch retry-failed ${batchId} --code ${l.code}\` sends them as they are, deliberately`,
  );
}

export interface ExportedResults {
  succeeded: number;
  failed: number;
  files: string[];
  /** Failed rows left out of `failed.csv` (written to `left-out.csv` instead), by code. */
  leftOut: LeftOut[];
  /** Downloaded videos checked against their rows. */
  verification: VerificationSummary;
}

/**
 * Writes `succeeded.<fmt>` and `failed.<fmt>` into `dir`. As CSV, the succeeded file lists results and the
 * failed file is a valid input CSV (its errors go to `failed-errors.csv`), so it can be fixed and run again.
 */
export async function exportResults(
  manifest: string,
  dir: string,
  format: 'csv' | 'jsonl',
): Promise<ExportedResults> {
  const results = (await readManifest(manifest)).sort((a, b) => a.line - b.line);
  const succeeded = results.filter((r) => r.status === 'succeeded');
  const failed = results.filter((r) => r.status === 'failed');
  const leftOut = format === 'csv' ? leftOutOf(failed) : [];
  await mkdir(dir, { recursive: true });
  const files: string[] = [];
  const write = async (name: string, text: string) => {
    files.push(join(dir, name));
    await writeFile(join(dir, name), text);
  };
  if (format === 'jsonl') {
    const jsonl = (rows: PromptResult[]) =>
      rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');
    await write('succeeded.jsonl', jsonl(succeeded));
    await write('failed.jsonl', jsonl(failed));
  } else {
    const table = (rows: PromptResult[]) =>
      csvText([
        [...RESULT_COLUMNS, 'file', 'verification', 'reusedFrom', 'arrivedLate'],
        ...rows.map((r) => [
          ...RESULT_COLUMNS.map((c) => String(r[c] ?? '')),
          r.file ?? '',
          verificationCell(r),
          r.reusedFrom ? `${r.reusedFrom.batchId}/${r.reusedFrom.rowId}` : '',
          // A late video: how and when its row had ended before it arrived.
          r.arrivedLate ? `${r.arrivedLate.endedAs} at ${r.arrivedLate.endedAt}` : '',
        ]),
      ]);
    await write('succeeded.csv', table(succeeded));
    // failed.csv is run again as it is: rows that would then be paid again by accident go to left-out.csv,
    // to edit (a refused prompt) or send deliberately.
    const held = failed.filter((r) => leftOutReason(r.errorCode));
    await write('failed.csv', csvText(inputRows(failed.filter((r) => !leftOutReason(r.errorCode)))));
    if (held.length) await write('left-out.csv', csvText(inputRows(held)));
    await write('failed-errors.csv', table(failed));
  }
  return {
    succeeded: succeeded.length,
    failed: failed.length,
    files,
    leftOut,
    verification: summarizeVerification(results),
  };
}

/**
 * Writes an input CSV of the failed rows (optionally of one error code) and returns its path and row count.
 * Without a code, the rows leftOutReason names are left out (and counted in `leftOut`): only their code takes them.
 */
export async function failedRowsCsv(
  manifest: string,
  dir: string,
  batchId: string,
  errorCode?: string,
  /** Rows an earlier retry of this batch already took: left out (that retry is where they go on). */
  taken: ReadonlySet<string> = new Set(),
): Promise<{ path: string; rows: number; leftOut: LeftOut[] }> {
  const candidates = (await readManifest(manifest))
    .filter((r) => r.status === 'failed' && (!errorCode || r.errorCode === errorCode) && !taken.has(r.rowId))
    .sort((a, b) => a.line - b.line);
  const failed = errorCode ? candidates : candidates.filter((r) => !leftOutReason(r.errorCode));
  await mkdir(dir, { recursive: true });
  const path = retryCsvPath(dir, batchId, errorCode);
  await writeFile(path, csvText(inputRows(failed)));
  return { path, rows: failed.length, leftOut: errorCode ? [] : leftOutOf(candidates) };
}

/** Where `retry-failed` writes the rows it takes from `batchId` (in the original batch's folder). */
export function retryCsvPath(dir: string, batchId: string, errorCode?: string): string {
  return join(dir, `retry-of-${batchId}${errorCode ? `-${errorCode}` : ''}.csv`);
}
