// Faults of one job rather than one request: a job that answers every status query badly, for as long as
// anyone asks. The dice are rolled once, when the job is made, so retries meet the same answer every time.
import type { FaultKind, FaultOptions } from './fault-settings';

/**
 * `no_url`: `completed` without `data[].url`; `error5xx`: HTTP 500 for this job id; `gone`: 404, as for a job
 * the gateway forgot; `status_unknown`: 200 with the status `UNKNOWN` (a provider's answer for a task past 24 h).
 */
export type BadJobAnswer = 'no_url' | 'error5xx' | 'gone' | 'status_unknown';

export const hasWord = (prompt: string, words: string[]) =>
  words.some((w) => prompt.toLowerCase().includes(w.toLowerCase()));

/** The job's bad answer: by a word in its prompt (`goneWords`, `unknownStatusWords`), else by the dice. */
export function rollBadAnswer(
  roll: (fault: FaultKind) => boolean,
  prompt = '',
  faults?: Pick<FaultOptions, 'goneWords' | 'unknownStatusWords'>,
): { badAnswer?: BadJobAnswer } {
  if (faults && hasWord(prompt, faults.goneWords)) return { badAnswer: 'gone' };
  if (faults && hasWord(prompt, faults.unknownStatusWords)) return { badAnswer: 'status_unknown' };
  if (roll('jobNoUrl')) return { badAnswer: 'no_url' };
  if (roll('jobError5xx')) return { badAnswer: 'error5xx' };
  return {};
}
