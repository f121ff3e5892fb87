import { describe, expect, it } from 'vitest';
import { redactSecrets } from '../../src/gateway/redact';

describe('redactSecrets', () => {
  it('replaces any sk- token, wherever it stands, not only the configured key', () => {
    const text =
      'proxy: key sk-live-0123456789abcdef refused; "api_key":"sk-proj_AbC-123456789"; x=sk-ABCDEFGH.';
    expect(redactSecrets(text)).toBe('proxy: key [redacted] refused; "api_key":"[redacted]"; x=[redacted].');
  });

  it('replaces the configured key even when it does not look like sk-, and echoed headers and bearer tokens', () => {
    expect(redactSecrets('k=my-secret-key, Authorization: Basic Zm9vOmJhcg==', 'my-secret-key')).toBe(
      'k=[redacted], Authorization: [redacted]',
    );
    expect(redactSecrets('sent Bearer abc.def.ghi then')).toBe('sent Bearer [redacted] then');
  });

  it('leaves words and cut fragments that are no key alone', () => {
    expect(redactSecrets('desk-lamp, task-1234567890, sk-learn, sk-ab')).toBe(
      'desk-lamp, task-1234567890, sk-learn, sk-ab',
    );
  });
});
