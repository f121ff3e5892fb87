import { describe, expect, it } from 'vitest';
import { firstAskStep, MAX_FIRST_ASKS } from '../../src/workflows/first-ask';

const POLL = 30_000;

describe('a job first checked after asking the worker when it is due', () => {
  it('waits for a due age the worker knows, whether it comes soon or late', () => {
    expect(firstAskStep({ waitForEstimate: false, dueInMs: 10_000 }, 0, POLL)).toBe('due');
    expect(firstAskStep({ waitForEstimate: false, dueInMs: 90_000 }, 0, POLL)).toBe('due');
  });

  it('asks again while nothing is known and enough jobs will teach it, else is checked now', () => {
    expect(firstAskStep({ waitForEstimate: true }, 0, POLL)).toBe('ask-again');
    expect(firstAskStep({ waitForEstimate: false }, 0, POLL)).toBe('check-now');
    expect(firstAskStep({ waitForEstimate: true }, MAX_FIRST_ASKS - 1, POLL)).toBe('check-now');
  });

  it('takes a guessed due age only when it comes before the next ask would', () => {
    // Guessed 18 s off: before the next ask in 30 s.
    expect(firstAskStep({ waitForEstimate: false, dueInMs: 18_000, guess: true }, 1, POLL)).toBe('due');
    // Guessed 65 s off (95 s for a job 30 s old): ask again when more is known.
    expect(firstAskStep({ waitForEstimate: false, dueInMs: 65_000, guess: true }, 0, POLL)).toBe('ask-again');
    // The last ask takes it.
    expect(
      firstAskStep({ waitForEstimate: false, dueInMs: 65_000, guess: true }, MAX_FIRST_ASKS - 1, POLL),
    ).toBe('due');
  });
});
