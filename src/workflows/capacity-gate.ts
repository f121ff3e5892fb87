// The capacity gate: a gateway that caps running jobs per key refuses
// submits with 429 and a long Retry-After (the time until one of its jobs finishes). Every refused prompt
// sleeping its own Retry-After wakes with the others and all but one are refused again: a herd. Here the batch
// is the gate instead. It learns the cap as the number of its prompts holding an unfinished job when a refusal
// comes, starts no new prompt beyond it, and hands a waiting prompt a slot each time one of its jobs finishes,
// plus one probe slot when a refusal's Retry-After has passed (a job may finish before its prompt checks it,
// and the cap may have been raised). Plain methods, no Temporal calls: BatchState owns one and the unit tests
// drive it directly. Its state goes with the window across continue-as-new (save, restore).
import type { CapacityGateCarry } from '../contract/batch';

/** What the gate asks of the workflow. */
export interface CapacityGateEffects {
  /** Let a waiting prompt submit (the `unblock` signal). */
  unblock(rowId: string): void;
  /** Call `fire` after `ms` (a durable timer). */
  timer(ms: number, fire: () => void): void;
}

/** Before the first refusal, at most this many started prompts wait for their first submit's outcome (or as many as were sent). */
export const CAPACITY_RAMP = 10;
/** Bounds of the wait between probes after a probe went through (from the pace of recent submits). */
const MIN_PROBE_GAP_MS = 1000;
const MAX_PROBE_GAP_MS = 60_000;

export class CapacityGate {
  /** Prompts holding a job sent this run and not yet finished (as far as the batch knows). */
  private readonly running = new Set<string>();
  /** The cap as seen at the last refusal: jobs running then. Null until a refusal. */
  private cap: number | null = null;
  /** Refused prompts waiting for a slot, first refused first. */
  private readonly waiting: string[] = [];
  /** Prompts refused with a short Retry-After before any capacity refusal, and when it has passed (epoch ms). */
  private readonly sleeping = new Map<string, number>();
  /** When the next probe slot opens (after a refusal's Retry-After, or the pace of submits). */
  private probeAt: number | null = null;
  /** A probe slot is open and not yet given. */
  private probeOpen = false;
  /** The prompt that holds the probe slot until it reports. */
  private probeRow: string | null = null;
  /**
   * Probes that went through: each took the slot of a job that had finished at the gateway before its prompt
   * saw it, so that prompt's finish frees nothing (it is not handed out again).
   */
  private prepaid = 0;
  /** Times of the last submits that went through (the pace at which the gateway frees slots). */
  private readonly sends: number[] = [];
  private sentCount = 0;

  constructor(
    private readonly effects: CapacityGateEffects,
    /** Started prompts whose submit has not reported yet (waiting ones included). */
    private readonly unsent: ReadonlySet<string>,
    /** Whether rows remain to be started. */
    private readonly moreRows: () => boolean,
  ) {}

  /** The state the next run restores, timers included (by their times). */
  save(): CapacityGateCarry {
    return {
      running: [...this.running],
      cap: this.cap,
      waiting: [...this.waiting],
      sleeping: [...this.sleeping],
      probeAt: this.probeAt,
      probeOpen: this.probeOpen,
      probeRow: this.probeRow,
      prepaid: this.prepaid,
      sends: [...this.sends],
      sentCount: this.sentCount,
    };
  }

  /** Takes over an earlier run's state, and sets its timers again. */
  restore(saved: CapacityGateCarry, now: number): void {
    for (const rowId of saved.running) this.running.add(rowId);
    this.cap = saved.cap;
    this.waiting.push(...saved.waiting);
    for (const [rowId, until] of saved.sleeping) this.sleepUntil(rowId, until, now);
    this.probeOpen = saved.probeOpen;
    this.probeRow = saved.probeRow;
    this.prepaid = saved.prepaid;
    this.sends.push(...saved.sends);
    this.sentCount = saved.sentCount;
    if (saved.probeAt !== null) {
      const at = saved.probeAt;
      this.probeAt = at;
      this.effects.timer(Math.max(0, at - now), () => this.probeDue(at));
    }
  }

  get active(): boolean {
    return this.cap !== null;
  }

  /** Whether one more prompt may start: before any refusal, a short ramp; then only into a free slot. */
  mayStart(): boolean {
    if (this.cap === null) return this.unsent.size < Math.max(CAPACITY_RAMP, this.sentCount);
    return this.waiting.length === 0 && this.free() > 0;
  }

  /** A prompt started (it submits without asking; already in `unsent`): takes the probe slot when that let it. */
  started(rowId: string): void {
    if (this.cap !== null && this.probeOpen && this.free() <= 0) {
      this.probeOpen = false;
      this.probeRow = rowId;
    }
  }

  /** A prompt's submit brought a job id. */
  sent(rowId: string, now: number): void {
    this.running.add(rowId);
    this.remove(rowId);
    this.sentCount += 1;
    this.sends.push(now);
    if (this.sends.length > 20) this.sends.shift();
    if (this.probeRow === rowId) {
      // The probe found a free slot: the next may be free soon too; try at the pace slots have been freeing.
      this.probeRow = null;
      // With no other job of ours that may have finished unseen, the slot was not ours: the cap is higher.
      if (this.prepaid < this.running.size - 1) this.prepaid += 1;
      else this.cap = Math.max(this.cap ?? 0, this.holding());
      this.scheduleProbe(now + this.probeGap(now), now);
    } else if (this.cap !== null && this.holding() > this.cap) {
      this.cap = this.holding(); // more fit than seen at the refusal (a late report, or a raised cap)
    }
  }

  /**
   * A prompt's submit was refused with 429. A Retry-After over `capacityAfterMs`, or any once the gate is
   * on, is a capacity refusal: the prompt waits for a slot (so do those sleeping out a short one). Before
   * that, a short Retry-After reads as a request rate limit: the prompt goes again when it has passed.
   * Returns whether it was taken for a capacity refusal.
   */
  rateLimited(rowId: string, retryAfterMs: number, now: number, capacityAfterMs: number): boolean {
    if (this.cap === null && retryAfterMs <= capacityAfterMs) {
      this.sleepUntil(rowId, now + retryAfterMs, now);
      return false;
    }
    this.refused(rowId, retryAfterMs, now);
    return true;
  }

  /** A prompt's submit was refused for capacity: it waits for a slot. */
  refused(rowId: string, retryAfterMs: number, now: number): void {
    if (this.probeRow === rowId) this.probeRow = null;
    this.cap = this.holding();
    for (const r of this.sleeping.keys()) if (!this.waiting.includes(r)) this.waiting.push(r);
    this.sleeping.clear();
    if (!this.waiting.includes(rowId)) this.waiting.push(rowId);
    this.scheduleProbe(now + retryAfterMs, now);
    this.grant();
  }

  /** A prompt ended: its job (if it had one) no longer holds a slot. */
  finished(rowId: string): void {
    if (this.running.delete(rowId) && this.prepaid > 0) this.prepaid -= 1;
    this.remove(rowId);
    this.sleeping.delete(rowId);
    if (this.probeRow === rowId) {
      this.probeRow = null;
      this.probeOpen = true;
    }
    this.grant();
  }

  /** The probe timer fired. */
  probeDue(now: number): void {
    if (this.probeAt === null || this.probeAt > now) return; // a stale timer
    this.probeAt = null;
    if (!this.demand()) return;
    this.probeOpen = true;
    this.grant();
  }

  /** "capacity gate: 10 jobs running (the gateway's cap), 3 rows waiting for a slot", or null. */
  describe(now: number): string | null {
    if (this.cap === null || !this.demand()) return null;
    const next =
      this.probeAt !== null && this.probeAt > now
        ? `; next try without a finished job at ${new Date(this.probeAt).toISOString().slice(11, 19)} UTC`
        : '';
    return (
      `capacity gate: ${this.holding()} jobs running (the gateway's cap, as seen at its last refusal: ` +
      `${this.cap}), ${this.waiting.length} rows waiting for a slot${next}`
    );
  }

  /** Figures for status and tests. */
  snapshot(): { cap: number | null; running: number; waiting: number; probeAt: number | null } {
    return { cap: this.cap, running: this.holding(), waiting: this.waiting.length, probeAt: this.probeAt };
  }

  /** Jobs of this batch running at the gateway as far as it can tell (a probe that went through took a finished one's slot). */
  private holding(): number {
    return this.running.size - this.prepaid;
  }

  /** Slots free: the cap (and an open or given probe slot) less jobs running and submits on their way. */
  private free(): number {
    const waitingUnsent = this.waiting.filter((r) => this.unsent.has(r)).length;
    const onTheirWay = Math.max(0, this.unsent.size - waitingUnsent);
    const probe = this.probeOpen || this.probeRow !== null ? 1 : 0;
    return (this.cap ?? 0) + probe - this.holding() - onTheirWay;
  }

  /** Hands free slots to waiting prompts, first come first served. */
  private grant(): void {
    while (this.waiting.length > 0 && this.free() > 0) {
      const rowId = this.waiting.shift()!;
      if (this.probeOpen && this.free() <= 1) {
        this.probeOpen = false;
        this.probeRow = rowId;
      }
      this.effects.unblock(rowId);
    }
  }

  /** A prompt sleeps out a short Retry-After, then goes again unless a capacity refusal made it wait. */
  private sleepUntil(rowId: string, until: number, now: number): void {
    this.sleeping.set(rowId, until);
    this.effects.timer(Math.max(0, until - now), () => {
      if (this.sleeping.delete(rowId)) this.effects.unblock(rowId);
    });
  }

  private demand(): boolean {
    return this.waiting.length > 0 || this.moreRows();
  }

  private scheduleProbe(at: number, now: number): void {
    if (this.probeOpen || this.probeRow !== null) return; // one probe at a time
    if (this.probeAt !== null && this.probeAt <= at) return;
    this.probeAt = at;
    this.effects.timer(Math.max(0, at - now), () => this.probeDue(at));
  }

  /** The mean gap between the last `cap` submits that went through, within bounds. */
  private probeGap(now: number): number {
    const k = Math.min(this.sends.length, Math.max(1, this.cap ?? 1));
    const gap = (now - this.sends[this.sends.length - k]!) / k;
    return Math.round(Math.min(MAX_PROBE_GAP_MS, Math.max(MIN_PROBE_GAP_MS, gap)));
  }

  private remove(rowId: string): void {
    const i = this.waiting.indexOf(rowId);
    if (i >= 0) this.waiting.splice(i, 1);
  }
}
