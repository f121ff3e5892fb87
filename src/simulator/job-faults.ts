// Faults of one job rather than one request: a job that answers every status query badly, for as long as
// anyone asks. The dice are rolled once, when the job is made, so retries meet the same answer every time.
import type { FaultKind } from './fault-settings';

/** `no_url`: `completed` without `data[].url`; `error5xx`: HTTP 500 for this job id. */
export type BadJobAnswer = 'no_url' | 'error5xx';

/** The job's bad answer, if the dice give it one (`jobNoUrl`, `jobError5xx`). */
export function rollBadAnswer(roll: (fault: FaultKind) => boolean): { badAnswer?: BadJobAnswer } {
  if (roll('jobNoUrl')) return { badAnswer: 'no_url' };
  if (roll('jobError5xx')) return { badAnswer: 'error5xx' };
  return {};
}
