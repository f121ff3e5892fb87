import { describe, expect, it } from 'vitest';
import type { ScenarioReport } from '../../bench/scenario';
import { scaledDown, TARGET_SCENARIOS, targetRow } from '../../bench/targets';
import { timelineRows } from '../../bench/timeline';

// A scenario's report with only what targetRow reads filled in.
function report(o: {
  makespanS: number;
  clairvoyantS?: number;
  boundS?: number;
  maxRunning?: number;
  requestsPerPrompt?: number;
  rateLimitedPerJob?: number;
  shares?: number[];
  succeeded?: number;
}): ScenarioReport {
  return {
    settings: { prompts: 300, maxRunning: o.maxRunning ?? 0 },
    vidbatch: {
      makespanS: o.makespanS,
      clairvoyantS: o.clairvoyantS ?? null,
      boundS: o.boundS ?? null,
      requestsPerPrompt: o.requestsPerPrompt ?? 2,
      rateLimitedPerJob: o.rateLimitedPerJob ?? 0,
      succeeded: o.succeeded ?? 300,
      failed: 0,
      killedWorker: null,
    },
    naivePeer: { makespanS: 1000, requestsPerPrompt: 14, rateLimitedPerJob: 0.4 },
    batches: (o.shares ?? [1]).map((s) => ({ submitShareWhileAllRan: s })),
  } as unknown as ScenarioReport;
}

describe('targetRow', () => {
  const [oneWorker, , twoBatches, cap] = TARGET_SCENARIOS;

  it('meets a target when every figure is within it', () => {
    const row = targetRow('one', oneWorker!.target, report({ makespanS: 150, clairvoyantS: 140 }));
    expect(row.met).toBe(true);
    expect(row.ratio).toBeCloseTo(150 / 140);
    expect(row.peerRatio).toBeCloseTo(1000 / 140);
  });

  it('names every figure that missed', () => {
    const row = targetRow(
      'one',
      oneWorker!.target,
      report({ makespanS: 170, clairvoyantS: 140, requestsPerPrompt: 2.3, rateLimitedPerJob: 0.04 }),
    );
    expect(row.met).toBe(false);
    expect(row.missed).toEqual(['ratio 1.21 > 1.10', 'req 2.30 > 2.15', '429 0.040 > 0.03']);
  });

  it("checks each batch's share while both ran", () => {
    const fair = report({ makespanS: 150, clairvoyantS: 140, shares: [0.48, 0.52] });
    expect(targetRow('two', twoBatches!.target, fair).met).toBe(true);
    const unfair = report({ makespanS: 150, clairvoyantS: 140, shares: [0.7, 0.3] });
    expect(targetRow('two', twoBatches!.target, unfair).missed).toEqual(['share 70%/30%']);
  });

  it('measures the running-jobs cap against rows x latency / cap, not the clairvoyant schedule', () => {
    const row = targetRow('cap', cap!.target, report({ makespanS: 330, boundS: 300, maxRunning: 10 }));
    expect(row.referenceS).toBe(300);
    expect(row.ratio).toBeCloseTo(1.1);
    expect(row.met).toBe(true);
  });

  it('misses when a prompt did not succeed', () => {
    const row = targetRow(
      'one',
      oneWorker!.target,
      report({ makespanS: 140, clairvoyantS: 140, succeeded: 299 }),
    );
    expect(row.missed).toEqual(['299 of 300 succeeded']);
  });
});

describe('scaledDown', () => {
  it('divides sizes and times, keeping at least two prompts per batch and a cap of two', () => {
    const killed = scaledDown(TARGET_SCENARIOS[1]!.options, 10);
    expect(killed).toMatchObject({ prompts: 30, jobSeconds: 6, jobJitter: 2, killWorkerAt: 6, workers: 3 });
    expect(scaledDown(TARGET_SCENARIOS[3]!.options, 100)).toMatchObject({ prompts: 2, maxRunning: 2 });
  });
});

describe('timelineRows', () => {
  it('counts requests per 10 s and the lowest and highest limit sampled there', () => {
    const rows = timelineRows(
      [
        { at: 1_000, route: 'POST /v1/videos/generations', status: 200 },
        { at: 2_000, route: 'POST /v1/videos/generations', status: 429 },
        { at: 12_000, route: 'GET /v1/videos/generations/j1', status: 200 },
      ],
      [
        { at: 3_000, limit: 4 },
        { at: 5_000, limit: 0 },
      ],
      0,
    );
    expect(rows).toEqual([
      { fromS: 0, submits: 1, statusChecks: 0, rateLimited: 1, limitMin: 0, limitMax: 4 },
      { fromS: 10, submits: 0, statusChecks: 1, rateLimited: 0, limitMin: null, limitMax: null },
    ]);
  });
});
