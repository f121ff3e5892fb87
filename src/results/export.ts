// Exports of a batch's manifest: succeeded and failed files, and the failed rows as a valid input CSV.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'csv-stringify/sync';
import type { PromptResult } from '../contract/prompt';
import { neutralizeTable } from '../input/csv-formula';
import { readManifest } from './manifest';
import { summarizeVerification, verificationCell, type VerificationSummary } from './verification-summary';

/**
 * The columns of an input CSV that reproduce a row exactly (input.* and parameters.* included), as values:
 * writers pass them through csvText, which neutralises formulas.
 */
export function inputRows(results: PromptResult[]): string[][] {
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
      r.model,
      cell(r.parameters?.resolution),
      cell(r.parameters?.duration),
      ...inputKeys.map((k) => cell(r.input?.[k])),
      ...paramKeys.map((k) => cell(r.parameters?.[k])),
    ]),
  ];
}

/** A CSV file's text, every cell a spreadsheet would run as a formula prefixed with `'` (input/csv-formula.ts). */
function csvText(rows: string[][]): string {
  return stringify(neutralizeTable(rows));
}

const RESULT_COLUMNS = [
  'rowId',
  'line',
  'status',
  'prompt',
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

export interface ExportedResults {
  succeeded: number;
  failed: number;
  files: string[];
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
        [...RESULT_COLUMNS, 'file', 'verification', 'reusedFrom'],
        ...rows.map((r) => [
          ...RESULT_COLUMNS.map((c) => String(r[c] ?? '')),
          r.file ?? '',
          verificationCell(r),
          r.reusedFrom ? `${r.reusedFrom.batchId}/${r.reusedFrom.rowId}` : '',
        ]),
      ]);
    await write('succeeded.csv', table(succeeded));
    await write('failed.csv', csvText(inputRows(failed)));
    await write('failed-errors.csv', table(failed));
  }
  return {
    succeeded: succeeded.length,
    failed: failed.length,
    files,
    verification: summarizeVerification(results),
  };
}

/** Writes an input CSV of the failed rows (optionally of one error code) and returns its path and row count. */
export async function failedRowsCsv(
  manifest: string,
  dir: string,
  batchId: string,
  errorCode?: string,
  /** Rows an earlier retry of this batch already took: left out (that retry is where they go on). */
  taken: ReadonlySet<string> = new Set(),
): Promise<{ path: string; rows: number }> {
  const failed = (await readManifest(manifest))
    .filter((r) => r.status === 'failed' && (!errorCode || r.errorCode === errorCode) && !taken.has(r.rowId))
    .sort((a, b) => a.line - b.line);
  await mkdir(dir, { recursive: true });
  const path = retryCsvPath(dir, batchId, errorCode);
  await writeFile(path, csvText(inputRows(failed)));
  return { path, rows: failed.length };
}

/** Where `retry-failed` writes the rows it takes from `batchId` (in the original batch's folder). */
export function retryCsvPath(dir: string, batchId: string, errorCode?: string): string {
  return join(dir, `retry-of-${batchId}${errorCode ? `-${errorCode}` : ''}.csv`);
}
