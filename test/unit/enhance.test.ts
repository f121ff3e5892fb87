// The pure parts of prompt enhancement: reading a chat answer, the kept rewrites' keys and files, and the
// request key of a row to be rewritten.
import { mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { createEnhanceActivities, ENHANCE_MAX_RATE_LIMITED_ATTEMPTS } from '../../src/activities/enhance';
import { DEFAULT_ENHANCE_INSTRUCTIONS, DEFAULT_ENHANCE_MODEL } from '../../src/contract/enhance';
import type { PromptRow } from '../../src/contract/rows';
import { readChatAnswer } from '../../src/gateway/chat';
import { GatewayClient } from '../../src/gateway/client';
import { assignRequestKeys } from '../../src/input/request-key';
import { readRewrite, rewriteKey, rewritePath, writeRewrite } from '../../src/results/enhance-cache';
import { simulatedRewrite } from '../../src/simulator/chat-route';

const settings = { model: DEFAULT_ENHANCE_MODEL, instructions: DEFAULT_ENHANCE_INSTRUCTIONS };

describe('readChatAnswer', () => {
  it('reads choices[0].message.content, trimmed, and usage', () => {
    expect(
      readChatAnswer({
        choices: [{ message: { role: 'assistant', content: '  a fox, slow pan  ' } }],
        usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 },
      }),
    ).toEqual({
      content: 'a fox, slow pan',
      usage: { promptTokens: 10, completionTokens: 4, totalTokens: 14 },
    });
    expect(readChatAnswer({ choices: [{ message: { content: 'x' } }] })).toEqual({ content: 'x' });
  });

  it('names what is wrong with any other answer, never an empty text', () => {
    const problem = (json: unknown) => (readChatAnswer(json) as { problem?: string }).problem;
    expect(problem({ choices: [{ message: { content: '' } }] })).toMatch(/content is empty/);
    expect(problem({ choices: [{ message: { content: '   ' } }] })).toMatch(/content is empty/);
    expect(problem({ choices: [{ message: { role: 'assistant' } }] })).toMatch(
      /no choices\[0\]\.message\.content/,
    );
    expect(problem({ choices: [{ message: { content: null, refusal: 'no' } }] })).toMatch(/refusal: no/);
    expect(problem({ choices: [{ message: { content: [{ type: 'text' }] } }] })).toMatch(/not text/);
    expect(problem({ choices: [] })).toMatch(/no choices\[0\]/);
    expect(problem({ output: 'hi' })).toMatch(/no choices\[0\]/);
    expect(problem('hi')).toMatch(/not a JSON object/);
    expect(problem(undefined)).toMatch(/not a JSON object/);
  });
});

describe('kept rewrites', () => {
  it('are keyed by chat model, instructions and original prompt', () => {
    const key = rewriteKey(settings, 'a fox');
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(rewriteKey(settings, 'a fox')).toBe(key);
    expect(rewriteKey(settings, 'a fox ')).not.toBe(key);
    expect(rewriteKey({ ...settings, model: 'other-chat' }, 'a fox')).not.toBe(key);
    expect(rewriteKey({ ...settings, instructions: 'be brief' }, 'a fox')).not.toBe(key);
    expect(rewritePath('/out', settings, 'a fox')).toBe(`/out/enhanced/${key}.json`);
  });

  it('are written atomically and read back only for the same settings', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vidbatch-enhance-'));
    expect(await readRewrite(root, settings, 'a fox')).toBeUndefined();
    await writeRewrite(root, settings, { original: 'a fox', enhanced: 'a fox, dolly-in', at: 'now' });
    expect(await readdir(join(root, 'enhanced'))).toEqual([`${rewriteKey(settings, 'a fox')}.json`]);
    expect(await readRewrite(root, settings, 'a fox')).toMatchObject({
      model: DEFAULT_ENHANCE_MODEL,
      original: 'a fox',
      enhanced: 'a fox, dolly-in',
    });
    expect(await readRewrite(root, { ...settings, instructions: 'other' }, 'a fox')).toBeUndefined();
    // A file that does not hold this prompt's rewrite (edited by hand, torn) is not sent.
    await writeFile(rewritePath(root, settings, 'a fox'), '{"model":');
    expect(await readRewrite(root, settings, 'a fox')).toBeUndefined();
  });
});

describe('request keys of rows to be rewritten', () => {
  const row = (id: string, prompt: string, extra: Partial<PromptRow> = {}): PromptRow => ({
    id,
    line: 2,
    prompt,
    model: 'modelfamily-1.0-r2v',
    input: { prompt },
    parameters: { resolution: '720P', duration: 5 },
    ...extra,
  });

  it('name the rewrite settings; a reviewed row is keyed by what it sends', () => {
    const plain = [row('a', 'a fox')];
    const enhanced = [row('a', 'a fox')];
    const other = [row('a', 'a fox')];
    assignRequestKeys(plain);
    assignRequestKeys(enhanced, settings);
    assignRequestKeys(other, { ...settings, instructions: 'be brief' });
    expect(enhanced[0]!.request).not.toBe(plain[0]!.request);
    expect(other[0]!.request).not.toBe(enhanced[0]!.request);
    const again = [row('b', 'a fox')];
    assignRequestKeys(again, settings);
    expect(again[0]!.request).toBe(enhanced[0]!.request);
    const reviewed = [row('a', simulatedRewrite('a fox'), { originalPrompt: 'a fox' })];
    const sentAsIs = [row('a', simulatedRewrite('a fox'))];
    assignRequestKeys(reviewed, settings);
    assignRequestKeys(sentAsIs);
    expect(reviewed[0]!.request).toBe(sentAsIs[0]!.request);
  });
});

describe('enhancePrompt on a gateway that always answers 429', () => {
  it('is retried after the Retry-After, and ends the row enhance_failed once its 429 attempts are spent', async () => {
    let calls = 0;
    const server = createServer((_req, res) => {
      calls += 1;
      res.writeHead(429, { 'retry-after': '0', 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'slow down' } }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as AddressInfo;
      const gateway = new GatewayClient({
        baseUrl: `http://127.0.0.1:${port}/v1`,
        apiKey: () => 'sk-test',
        timeoutMs: 5000,
      });
      const outRoot = await mkdtemp(join(tmpdir(), 'vidbatch-enhance-'));
      const activities = createEnhanceActivities(gateway, outRoot);
      const input = { batchId: 'batch-0123456789abcdef', rowId: 'r1', prompt: 'a fox', enhance: settings };
      const failure = (attempt: number) =>
        new MockActivityEnvironment({ attempt })
          .run((i: typeof input) => activities.enhancePrompt(i), input)
          .then(
            () => undefined,
            (err: unknown) => err as ApplicationFailure,
          );
      const early = await failure(2);
      expect(early?.nonRetryable).toBeFalsy();
      const last = await failure(ENHANCE_MAX_RATE_LIMITED_ATTEMPTS);
      expect(last?.type).toBe('EnhanceFailed');
      expect(last?.nonRetryable).toBe(true);
      expect(last?.message).toMatch(/answered 429 to the prompt's rewrite 30 times/);
      expect(calls).toBe(2);
      expect(await readdir(outRoot)).toEqual([]); // nothing kept for a rewrite that never came
    } finally {
      server.close();
    }
  });
});
