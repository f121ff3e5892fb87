import { describe, expect, it } from 'vitest';
import { publishedRate } from '../../src/gateway/rate-limit-headers';
import { RateLearner } from '../../src/workflows/rate-learner';

describe('the rate limit a gateway publishes', () => {
  it('reads RateLimit-Policy in both drafts’ shapes: the policy with the shortest window', () => {
    expect(publishedRate({ 'ratelimit-policy': '"default";q=5;w=1' })).toBe(5);
    expect(publishedRate({ 'ratelimit-policy': '10;w=2' })).toBe(5);
    expect(publishedRate({ 'ratelimit-policy': '"day";q=1000;w=86400, "burst";q=30;w=10' })).toBe(3);
    expect(publishedRate({ 'ratelimit-policy': ['100;w=60', '3;w=1'] })).toBe(3);
  });

  it('reads nothing from headers that state no window, or that it cannot parse', () => {
    expect(publishedRate({})).toBeUndefined();
    expect(publishedRate({ 'ratelimit-limit': '100' })).toBeUndefined();
    expect(publishedRate({ 'x-ratelimit-limit-requests': '60' })).toBeUndefined();
    expect(publishedRate({ 'ratelimit-policy': '"default";q=5' })).toBeUndefined();
    expect(publishedRate({ 'ratelimit-policy': '"default";q=five;w=1' })).toBeUndefined();
    expect(publishedRate({ 'ratelimit-policy': '0;w=1' })).toBeUndefined();
  });
});

describe('the learner and a published limit', () => {
  it('applies the gateway’s pin, and an operator’s pin wins over it', () => {
    const learner = new RateLearner(0);
    learner.pin(2.85, 'gateway');
    expect(learner.target(0)).toBe(2.85);
    expect(learner.state.pinnedBy).toBe('gateway');
    learner.pin(2); // an operator's --gateway-rps
    expect(learner.target(0)).toBe(2);
    expect(learner.state.pinnedBy).toBeUndefined();
    learner.pin(4.75, 'gateway');
    expect(learner.target(0)).toBe(2);
    learner.pin(null); // the operator's pin lifted: learning again from the published limit
    expect(learner.target(0)).toBe(2.85);
  });
});
