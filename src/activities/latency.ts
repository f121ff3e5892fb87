// What this worker has seen of job latency, so that each job is checked about when it is likely finished
// rather than on a fixed schedule (every status check spends the same rate budget as a submission). Each
// check of a running job ("still running at age a") and each first sight of a finished one ("finished by
// age b") feed a Kaplan-Meier estimate of P(finished by age t), in which running jobs are censored; that
// keeps the early estimate honest while only the fastest jobs have finished. Ages are upper bounds (a job
// is seen finished at a check, not when it finished), so the estimate errs late, which costs a little
// latency and no requests.

const RECENT_FINISHED = 200;
const RUNNING_CAP = 5000;
const MIN_FINISHED = 10;
const CACHE_MS = 1000;

export class LatencyTracker {
  private readonly finishedAges: number[] = [];
  /** Job id → age at its latest "still running" check. */
  private readonly runningAges = new Map<string, number>();
  private cached: { at: number; q: number; value: number | undefined } | undefined;

  constructor(private readonly now: () => number = Date.now) {}

  stillRunning(jobId: string, ageMs: number): void {
    this.runningAges.delete(jobId);
    this.runningAges.set(jobId, ageMs);
    if (this.runningAges.size > RUNNING_CAP) this.runningAges.delete(this.runningAges.keys().next().value!);
  }

  finished(jobId: string, ageMs: number): void {
    this.runningAges.delete(jobId);
    this.finishedAges.push(ageMs);
    if (this.finishedAges.length > RECENT_FINISHED) this.finishedAges.shift();
  }

  /** The age by which a share `q` of jobs have finished, or undefined while too little is known. */
  quantile(q: number): number | undefined {
    const now = this.now();
    if (this.cached && this.cached.q === q && now - this.cached.at < CACHE_MS) return this.cached.value;
    this.cached = { at: now, q, value: this.estimate(q) };
    return this.cached.value;
  }

  private estimate(q: number): number | undefined {
    if (this.finishedAges.length < MIN_FINISHED) return undefined;
    // Events before censorings at equal ages, as Kaplan-Meier requires.
    const observations = [
      ...this.finishedAges.map((age) => ({ age, event: true })),
      ...[...this.runningAges.values()].map((age) => ({ age, event: false })),
    ].sort((a, b) => a.age - b.age || Number(b.event) - Number(a.event));
    let atRisk = observations.length;
    let survival = 1;
    for (const { age, event } of observations) {
      if (event) {
        survival *= 1 - 1 / atRisk;
        if (survival <= 1 - q) return age;
      }
      atRisk -= 1;
    }
    return undefined;
  }
}
