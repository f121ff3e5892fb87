// The bench's reference schedule (docs/benchmarks.md): the makespan of a client that knows every job's latency
// in advance, against the same token bucket as the gateway, making one submission and one status check per
// job. Greedy on the bucket: every token is spent as soon as it exists; a check of a finished job goes first
// (each check the moment its job finishes, or the first token after), otherwise the longest job not yet
// submitted is submitted (longest first shortens the tail). No client can do better than this by much: it
// never waits with a token in hand while work remains, and it never checks a job twice.

/** Makespan (ms, from the first request) for job latencies `latenciesMs` under `rate` rps with `burst` tokens. */
export function clairvoyantMakespanMs(
  latenciesMs: number[],
  rate: number,
  burst = Math.max(1, rate),
): number {
  if (latenciesMs.length === 0) return 0;
  if (rate <= 0) return Math.max(...latenciesMs); // no limit: submit all at once, check each as it finishes
  const toSubmit = [...latenciesMs].sort((a, b) => b - a);
  const finishes: number[] = []; // finish times of submitted, unchecked jobs, kept sorted
  let t = 0;
  let tokens = burst;
  let makespan = 0;
  let next = 0;
  while (next < toSubmit.length || finishes.length > 0) {
    const tokenAt = tokens >= 1 ? t : t + ((1 - tokens) / rate) * 1000;
    const due = finishes[0];
    const submitting = next < toSubmit.length && (due === undefined || due > tokenAt);
    const at = submitting ? tokenAt : Math.max(tokenAt, due!);
    tokens = Math.min(burst, tokens + ((at - t) / 1000) * rate) - 1;
    t = at;
    if (submitting) {
      const done = t + toSubmit[next++]!;
      const i = finishes.findIndex((f) => f > done);
      finishes.splice(i === -1 ? finishes.length : i, 0, done);
    } else {
      finishes.shift();
      makespan = t;
    }
  }
  return makespan;
}
