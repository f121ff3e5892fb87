// What a prompt does with the worker's answer to "when is this job's first check due?", asked after the
// schedule's first poll by a job submitted before the worker knew the gateway's latency (prompt.ts).
import type { FirstCheckTiming } from '../contract/jobs';

/** How often a job asks before its first check goes anyway. */
export const MAX_FIRST_ASKS = 3;

/**
 * `due`: wait for the due age the worker gave; `ask-again`: ask again after another first poll; `check-now`.
 * `ask` counts from 0. While the worker knows nothing, the jobs that teach it are checked now and the others ask
 * again, when enough will teach it. A guessed due age (no age reaches 90% of the jobs finished yet) is taken
 * when it comes before the next ask would; one further off waits for what the worker knows then: one job seen
 * running at 76 s made the guess 95 s just as a 300-prompt batch's last jobs asked, and their checks came at
 * 150 s (about 140 s asking again). The last ask takes what there is.
 */
export function firstAskStep(
  timing: FirstCheckTiming,
  ask: number,
  askEveryMs: number,
): 'due' | 'ask-again' | 'check-now' {
  const last = ask + 1 >= MAX_FIRST_ASKS;
  const farGuess = timing.guess === true && (timing.dueInMs ?? 0) > askEveryMs;
  if (timing.dueInMs !== undefined && (!farGuess || last)) return 'due';
  if (last) return 'check-now';
  return timing.waitForEstimate || farGuess ? 'ask-again' : 'check-now';
}
