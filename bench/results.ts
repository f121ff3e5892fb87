// Manifest lines for benchmarks: a row as the batch records it when its job succeeded.
import type { PromptResult } from '../src/contract/prompt';
import type { PromptRow } from '../src/contract/rows';

export function succeeded(row: PromptRow, finishedAt = new Date(0).toISOString()): PromptResult {
  return {
    rowId: row.id,
    line: row.line,
    prompt: row.prompt,
    model: row.model,
    input: row.input,
    parameters: row.parameters,
    ...(row.request ? { request: row.request } : {}),
    status: 'succeeded',
    jobId: `vid_${row.id}`,
    url: `https://cdn.example/v/${row.id}.mp4`,
    attempts: 1,
    polls: 1,
    finishedAt,
  };
}
