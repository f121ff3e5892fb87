// One gate per worker process in front of every gateway call: after a 429, all calls from this worker wait
// out the Retry-After instead of each prompt discovering the limit for itself.

export class RequestGate {
  private openAt = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** Hold every call until `ms` from now (never shortens an existing hold). */
  holdFor(ms: number): void {
    this.openAt = Math.max(this.openAt, this.now() + ms);
  }

  /** Ms left on the hold (0 when open). */
  remaining(): number {
    return Math.max(0, this.openAt - this.now());
  }

  async pass(): Promise<void> {
    for (let wait = this.remaining(); wait > 0; wait = this.remaining()) {
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}
