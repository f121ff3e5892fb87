import { describe, expect, it } from 'vitest';
import { runLine, summarize, type RunLine } from '../../bench/repeat';
import type { ScenarioReport } from '../../bench/scenario';

const line = (
  run: number,
  ratio: number | null,
  req: number,
  limited: number,
  lastJobS: number | null,
): RunLine => ({
  run,
  makespanS: (ratio ?? 1) * 100,
  ratio,
  requestsPerPrompt: req,
  rateLimitedPerJob: limited,
  lastJobS,
});

describe('bench --repeat', () => {
  it('gives the median and the worst (highest) of each figure', () => {
    const [median, worst] = summarize([
      line(1, 1.1, 2.4, 0.05, 68),
      line(2, 1.41, 2.6, 0.12, 130),
      line(3, 1.12, 2.5, 0.03, 70),
      line(4, 1.15, 2.3, 0.04, 81),
    ]);
    expect(median).toMatchObject({ run: 'median', requestsPerPrompt: 2.45, lastJobS: 75.5 });
    expect(median.ratio).toBeCloseTo(1.135);
    expect(median.rateLimitedPerJob).toBeCloseTo(0.045);
    expect(worst).toMatchObject({
      run: 'worst',
      ratio: 1.41,
      requestsPerPrompt: 2.6,
      rateLimitedPerJob: 0.12,
      lastJobS: 130,
    });
  });

  it('leaves a figure no run has as null (no reference, no --timeline)', () => {
    const [median, worst] = summarize([
      line(1, null, 2, 0, null),
      line(2, null, 3, 0, null),
      line(3, null, 4, 0, null),
    ]);
    expect(median).toMatchObject({ ratio: null, lastJobS: null, requestsPerPrompt: 3 });
    expect(worst).toMatchObject({ ratio: null, lastJobS: null, requestsPerPrompt: 4 });
  });

  it("reads a run's ratio against its reference, and its last job from the last submits", () => {
    const report = {
      settings: { maxRunning: 0 },
      vidbatch: {
        makespanS: 150,
        clairvoyantS: 120,
        boundS: 180,
        requestsPerPrompt: 2.5,
        rateLimitedPerJob: 0.04,
      },
      lastSubmits: [{ madeAtS: 66 }, { madeAtS: 68 }],
    } as unknown as ScenarioReport;
    expect(runLine(2, report)).toEqual({
      run: 2,
      makespanS: 150,
      ratio: 1.25,
      requestsPerPrompt: 2.5,
      rateLimitedPerJob: 0.04,
      lastJobS: 68,
    });
    const capped = {
      ...report,
      settings: { maxRunning: 10 },
      lastSubmits: null,
    } as unknown as ScenarioReport;
    expect(runLine(1, capped)).toMatchObject({ ratio: 150 / 180, lastJobS: null });
  });
});
