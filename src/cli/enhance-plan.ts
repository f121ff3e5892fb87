// `plan --enhance`: every row's rewrite, made (or read from the output root's kept rewrites) in this process,
// without Temporal, and written as an input CSV with the original prompt in its own column, for the user to
// read and edit before anything is paid for. Running that CSV sends exactly what it says: rows with an
// `original_prompt` are never rewritten again. The rewrites are kept where `run --enhance` looks, so a run of
// the original file after this plan makes no chat call.
import { writeFile } from 'node:fs/promises';
import { basename, dirname, extname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EnhanceOptions } from '../contract/enhance';
import { rowFields, type PromptRow } from '../contract/rows';
import { loadGatewaySettings } from '../config';
import { VidbatchError } from '../errors';
import { rewriteMessages } from '../activities/enhance';
import { GatewayClient } from '../gateway/client';
import {
  AuthenticationError,
  KeyRefusedError,
  PermissionDeniedError,
  RateLimitError,
} from '../gateway/errors';
import type { ParsedCsv } from '../input/csv';
import { readRewrite, rewritesDir, writeRewrite } from '../results/enhance-cache';
import { csvText, inputRows } from '../results/export';

/** 429s one row may take (each waited out as its Retry-After says) before it is given up. */
const MAX_RATE_LIMITS = 8;
/** Other failed attempts (5xx, timeouts) one row may take. */
const MAX_ERRORS = 3;
/** Rewrites asked at once: a plan is a review step, not a race. */
const PARALLEL = 4;

export interface ReviewSummary {
  /** The CSV written for review (absent when no row could be rewritten). */
  csv?: string;
  rows: number;
  rewritten: number;
  /** Rows sent as their CSV says (it has `original_prompt`). */
  asWritten: number;
  chatCalls: number;
  kept: number;
  tokens: number;
  failed: { rowId: string; line: number; message: string }[];
}

class KeyRefused extends VidbatchError {
  override name = 'KeyRefused';
}

/** `<dir>/<name>.enhanced.csv` beside the input. */
export function reviewCsvPath(csvPath: string): string {
  return join(dirname(csvPath), `${basename(csvPath, extname(csvPath))}.enhanced.csv`);
}

export async function rewriteForReview(
  csv: ParsedCsv,
  csvPath: string,
  enhance: EnhanceOptions,
  outRoot: string,
): Promise<ReviewSummary> {
  const gateway = new GatewayClient(loadGatewaySettings());
  const summary: ReviewSummary = {
    rows: csv.rows.length,
    rewritten: 0,
    asWritten: 0,
    chatCalls: 0,
    kept: 0,
    tokens: 0,
    failed: [],
  };
  const out: (PromptRow | undefined)[] = csv.rows.map((r) =>
    r.originalPrompt !== undefined ? r : undefined,
  );
  summary.asWritten = out.filter(Boolean).length;

  const rewriteOne = async (row: PromptRow): Promise<string | { message: string }> => {
    const kept = await readRewrite(outRoot, enhance, row.prompt);
    if (kept) {
      summary.kept += 1;
      return kept.enhanced;
    }
    let limited = 0;
    let errors = 0;
    for (;;) {
      try {
        // A 429 holds this client's POSTs until its Retry-After: the next call waits it out before sending.
        const answer = await gateway.chat(enhance.model, rewriteMessages(enhance, row.prompt));
        summary.chatCalls += 1;
        if ('problem' in answer) return { message: `POST /chat/completions: ${answer.problem}` };
        summary.tokens += answer.usage?.totalTokens ?? 0;
        await writeRewrite(outRoot, enhance, {
          original: row.prompt,
          enhanced: answer.content,
          ...(answer.usage ? { usage: answer.usage } : {}),
          at: new Date().toISOString(),
          ...(answer.requestId ? { requestId: answer.requestId } : {}),
        });
        return answer.content;
      } catch (err) {
        if (
          err instanceof AuthenticationError ||
          err instanceof PermissionDeniedError ||
          err instanceof KeyRefusedError
        )
          throw new KeyRefused(
            `the gateway refused the API key (${err.message}): no more prompts are rewritten. Fix GATEWAY_API_KEY ` +
              `(or the key's access to ${enhance.model}) and run plan --enhance again; the rewrites made so far are kept`,
          );
        const message = err instanceof Error ? err.message : String(err);
        if (err instanceof RateLimitError) {
          if (++limited > MAX_RATE_LIMITS) return { message: `${message} (${limited} times)` };
          continue;
        }
        if (++errors >= MAX_ERRORS) return { message };
        await sleep(1000 * errors);
      }
    }
  };

  const todo = csv.rows.map((row, i) => ({ row, i })).filter(({ row }) => row.originalPrompt === undefined);
  const work = async () => {
    for (let next = todo.shift(); next; next = todo.shift()) {
      const { row, i } = next;
      const got = await rewriteOne(row);
      if (typeof got === 'string') {
        summary.rewritten += 1;
        out[i] = { ...row, prompt: got, originalPrompt: row.prompt, input: { ...row.input, prompt: got } };
      } else summary.failed.push({ rowId: row.id, line: row.line, message: got.message });
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, work));
  const rows = out.filter((r): r is PromptRow => !!r);
  if (rows.length) {
    summary.csv = reviewCsvPath(csvPath);
    await writeFile(summary.csv, csvText(inputRows(rows.map(rowFields))));
  }
  summary.failed.sort((a, b) => a.line - b.line);
  return summary;
}

/** What plan --enhance says on stderr. */
export function reviewLines(s: ReviewSummary, outRoot: string): string[] {
  const lines = [
    `rewrote ${s.rewritten} of ${s.rows} prompts: ${s.chatCalls} chat calls${s.tokens ? ` (${s.tokens} tokens)` : ''}, ` +
      `${s.kept} kept from earlier rewrites in ${rewritesDir(outRoot)}` +
      (s.asWritten ? `; ${s.asWritten} rows already have an original_prompt and are sent as they are` : ''),
  ];
  for (const f of s.failed)
    lines.push(`row ${f.rowId} (line ${f.line}): not rewritten, left out of the review CSV: ${f.message}`);
  if (s.csv)
    lines.push(
      `review (and edit) ${s.csv}, then \`vidbatch run ${s.csv}\`: it sends each prompt exactly as written there`,
    );
  return lines;
}
