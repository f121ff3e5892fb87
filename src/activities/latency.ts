// What this worker has seen of job latency, so that each job is first checked about when it is likely
// finished rather than on a fixed schedule (every status check spends the same rate budget as a submission).
// The gateway gives no timestamps, only "finished or not" at the moment of a check, so the estimate uses
// each job's first check alone: (age at the check, finished?). Their timing does not depend on the job's
// own latency, so an isotonic fit of "finished" against age (pool-adjacent-violators) estimates P(finished
// by age t) without bias, even when checks are late because the gateway or the worker is busy. Later checks
// of slow jobs are left out on purpose: counting them would bias the estimate towards slow jobs, and
// recording when a job was *seen* finished would let delays feed back into ever later checks.

const RECENT = 400;
const MIN_CHECKS = 20;
const TARGET = 0.9;
/**
 * Spare checks (workflows/first-check.ts) may start once this share of jobs has finished. Each that finds its
 * job running is a request more: from a quarter, a third did (the budget idle between a large batch's first
 * checks and its due ones).
 */
const SPARE_TARGET = 0.5;
/** A share of jobs is checked earlier than the estimate, so that it can move down as well as up. */
const EXPLORE_SHARE = 0.2;
const EXPLORE_FROM = 0.8;
/**
 * Before anything is known, this share of the jobs (those that explore later) is checked at the schedule's
 * first poll to learn the latency; the others wait for what they teach (waitsForEstimate). A fifth: at the
 * first poll a large batch has made only about half its jobs, and a tenth of those cannot make MIN_CHECKS.
 */
const FIRST_EXPLORE_SHARE = 0.2;
/** While no age reaches the target, the next first checks go this much later than a job was last seen running. */
const EXPAND = 1.25;
const CACHE_MS = 1000;
/** A last block of the fit spanning ages this far apart is a plateau, not checks that came too early. */
const FLAT_SPAN = 1.25;

export class LatencyTracker {
  private readonly checks: { age: number; finished: boolean }[] = [];
  /** Jobs this worker has checked at least once, so that only first checks are counted. */
  private readonly seen = new Set<string>();
  private readonly cached = new Map<number, { at: number; value: number | undefined; guess: boolean }>();
  /** Exploring jobs submitted while nothing was known and not checked yet: the estimate they will make. */
  private readonly pendingExplorers = new Set<string>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Records a status check of `jobId` at `ageMs` after submission. */
  checked(jobId: string, ageMs: number, finished: boolean): void {
    this.pendingExplorers.delete(jobId);
    if (this.seen.has(jobId)) {
      if (finished) this.seen.delete(jobId);
      return;
    }
    if (!finished) this.seen.add(jobId);
    if (this.seen.size > 10_000) this.seen.clear();
    this.checks.push({ age: ageMs, finished });
    if (this.checks.length > RECENT) this.checks.shift();
  }

  /**
   * The age at which to check `jobId` first: the age by which 90% of jobs have finished, or earlier for the
   * share of jobs that explore. Undefined while too little is known (the configured schedule applies).
   */
  firstCheckAge(jobId: string): number | undefined {
    const due = this.dueAge();
    if (due === undefined) return undefined;
    const h = hash(jobId);
    return h < EXPLORE_SHARE ? due * (EXPLORE_FROM + (1 - EXPLORE_FROM) * (h / EXPLORE_SHARE)) : due;
  }

  /** Records that `jobId` was submitted: one checked at the first poll while nothing is known will teach it. */
  submitted(jobId: string): void {
    if (!this.checkedAtFirstPoll(jobId) || this.dueAge() !== undefined) return;
    if (this.pendingExplorers.size >= 10_000) this.pendingExplorers.clear();
    this.pendingExplorers.add(jobId);
  }

  /**
   * Whether a job submitted before anything was known should wait for the estimate rather than be checked at
   * the schedule's first poll: it is not one of the share that is (FIRST_EXPLORE_SHARE, within those that
   * explore later), and those not checked yet are enough to make an estimate. In a small batch they are not,
   * and every job is checked at the first poll.
   */
  waitsForEstimate(jobId: string): boolean {
    return (
      !this.checkedAtFirstPoll(jobId) &&
      this.dueAge() === undefined &&
      this.checks.length + this.pendingExplorers.size >= MIN_CHECKS
    );
  }

  private checkedAtFirstPoll(jobId: string): boolean {
    return hash(jobId) < FIRST_EXPLORE_SHARE;
  }

  /** The age by which 90% of jobs have finished (see the top of this file), cached for a second. */
  dueAge(): number | undefined {
    return this.ageFor(TARGET);
  }

  /**
   * The age by which half the jobs have finished: spare checks may find a job finished from then on. None while
   * the due age is a guess: the first checks are then all younger than most jobs, and a large batch's spare
   * checks from such a fit (all in the idle seconds before its first due checks) found half their jobs running.
   */
  spareCheckAge(): number | undefined {
    if (this.ageFor(TARGET) === undefined || this.dueIsGuess()) return undefined;
    return this.ageFor(SPARE_TARGET);
  }

  /** Whether the due age is a guess: no age reaches 90% of the jobs finished yet (see estimate). */
  dueIsGuess(): boolean {
    return this.ageFor(TARGET) !== undefined && this.cached.get(TARGET)?.guess === true;
  }

  private ageFor(target: number): number | undefined {
    const now = this.now();
    const hit = this.cached.get(target);
    if (hit && now - hit.at < CACHE_MS) return hit.value;
    const { value, guess } = this.estimate(target);
    this.cached.set(target, { at: now, value, guess });
    return value;
  }

  /** The age by which `target` of the jobs have finished; `guess`: no age reaches it yet (see below). */
  private estimate(target: number): { value: number | undefined; guess: boolean } {
    if (this.checks.length < MIN_CHECKS) return { value: undefined, guess: false };
    const sorted = [...this.checks].sort((a, b) => a.age - b.age);
    // Pool adjacent violators: blocks of (mean finished share, count, last age), means non-decreasing.
    const blocks: { mean: number; n: number; age: number }[] = [];
    for (const { age, finished } of sorted) {
      blocks.push({ mean: finished ? 1 : 0, n: 1, age });
      while (blocks.length > 1 && blocks[blocks.length - 2]!.mean >= blocks[blocks.length - 1]!.mean) {
        const b = blocks.pop()!;
        const a = blocks.pop()!;
        blocks.push({ mean: (a.mean * a.n + b.mean * b.n) / (a.n + b.n), n: a.n + b.n, age: b.age });
      }
    }
    // The first block reaching the target: its ages are where the fitted share crosses it; take its first. A
    // block counts one running check more than it saw, so that a few finished checks at the oldest ages (all
    // a batch's first minute may have) do not claim the target: checked at such an age, half were running.
    let start = 0;
    for (const block of blocks) {
      if ((block.mean * block.n) / (block.n + 1) >= target)
        return { value: sorted[start]!.age, guess: false };
      start += block.n;
    }
    // No age reaches the target. When the finished share is flat over a span of ages (a share of jobs never
    // finishes, or answers badly), checking later would only drift towards the deadline: aim at 90% of the
    // jobs that do finish. Otherwise the checks were too early: go later. (A last block over the target is
    // too few checks to claim it, not a share that never finishes.)
    const plateau = blocks[blocks.length - 1]!;
    const last = sorted[sorted.length - 1]!.age;
    if (
      plateau.mean > 0 &&
      plateau.mean < target &&
      last >= FLAT_SPAN * sorted[sorted.length - plateau.n]!.age
    ) {
      start = 0;
      for (const block of blocks) {
        if (block.mean >= target * plateau.mean) return { value: sorted[start]!.age, guess: false };
        start += block.n;
      }
    }
    // Go later than a job was last seen running. The oldest check may be a job first checked late (one that
    // waited for the estimate) and found finished: it says nothing of later ages, and taken as the latest it
    // made a 300-prompt batch's guess jump from 79 s to 113 s just as its last jobs came due.
    let running = last;
    for (let i = sorted.length - 1; i >= 0; i--)
      if (!sorted[i]!.finished) {
        running = sorted[i]!.age;
        break;
      }
    return { value: running * EXPAND, guess: true };
  }
}

/** A stable number in [0, 1) per job id (FNV-1a). */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) / 2 ** 32;
}
