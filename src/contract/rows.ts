// A CSV row as it crosses Temporal, and what earlier runs know about it. Imported by workflow code: no Node
// built-ins.
import type { PromptResult, PromptStatus, ReusedFrom } from './prompt';

export const DEFAULT_MODEL = 'modelfamily-1.0-r2v';

/** Temporal payloads stay far below its 2 MB limit: a page of rows and a group of results at most this big. */
export const MAX_PAGE_BYTES = 512 * 1024;

/** One validated CSV row, as it travels through history. Never contains secrets. */
export interface PromptRow {
  /** Unique within the batch: the `id` column, or the row number. */
  id: string;
  /** 1-based line of the row in the file (where the record starts). */
  line: number;
  /** The prompt sent: the CSV's, or its rewrite (docs/enhance-prompts.md). */
  prompt: string;
  /**
   * The prompt as the user wrote it, when `prompt` is its rewrite: set by the rewrite, or read from a CSV's
   * `original_prompt` column (`plan --enhance` writes it; such a row is sent as it is, never rewritten again).
   */
  originalPrompt?: string;
  model: string;
  /** `input` object of the request: `prompt` plus any `input.<field>` columns. */
  input: Record<string, unknown>;
  /** `parameters` object of the request: resolution, duration and any `parameters.<field>` columns. */
  parameters: Record<string, unknown>;
  /**
   * The request's identity in its output root (input/request-key.ts): `<hash of what is sent>/<take>`. A row of
   * another batch in the same root with the same key is the same paid request.
   */
  request?: string;
  /** The `take` column, when the row names its take (a redo export does). */
  take?: string;
}

/** A row's own fields as its result carries them, so a failed row can be written back as an input row. */
export interface RowFields extends Omit<PromptRow, 'id'> {
  rowId: string;
}

/** What earlier runs know about a row: its final state in the manifest and its jobs in the jobs journal. */
export interface PriorOutcome {
  /** Final state in the manifest, if the row was recorded. */
  status?: PromptStatus;
  /** The error code of that final state, when it failed. */
  errorCode?: string;
  /** The row's latest known job: checked at the gateway before paying again. */
  jobId?: string;
  /** The key generation of that job (absent: `generation`). */
  jobGeneration?: number;
  /** `jobId` was stopped at the provider by an earlier run (`jobStop: stopped`): unless it finished, a new one is paid for. */
  jobStopped?: true;
  url?: string;
  /** Highest key generation used for the row so far (0 when none is known). */
  generation: number;
  /** Submits with an unknown outcome so far. */
  unknownSubmits?: number;
  /** POSTs this batch's earlier runs made for the row (the jobs journal's lines): --max-submissions counts them. */
  posts?: number;
  /** Not filled by readRows (the payload would double); kept for callers that have it. */
  result?: PromptResult;
  /** Another batch in the output root kept a video for this request: the result this row records, at no cost. */
  reused?: PromptResult;
  /** `jobId` is another batch's job for this request, followed instead of paying again. */
  followedFrom?: ReusedFrom;
}

/** A row as readRows returns it: the row, and what earlier runs know about it (absent: nothing). */
export type PageRow = PromptRow & { prior?: PriorOutcome };

export function rowFields(row: PromptRow): RowFields {
  return {
    rowId: row.id,
    line: row.line,
    prompt: row.prompt,
    ...(row.originalPrompt !== undefined ? { originalPrompt: row.originalPrompt } : {}),
    model: row.model,
    input: row.input,
    parameters: row.parameters,
    ...(row.request ? { request: row.request } : {}),
    ...(row.take ? { take: row.take } : {}),
  };
}
