// The pure parts of prompt enhancement: reading a chat answer, the kept rewrites' keys and files, and the
// request key of a row to be rewritten.
import { mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter, type ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import {
  createEnhanceActivities,
  ENHANCE_MAX_ATTEMPTS_IN_ALL,
  ENHANCE_MAX_RATE_LIMITED_ATTEMPTS,
  type EnhanceCounts,
} from '../../src/activities/enhance';
import { freePort } from '../../src/dev-server/dev-server';
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

/**
 * A gateway that answers every chat call with `status` (counting them), the enhancePrompt activity against it,
 * and one attempt of it: its failure, and the counts it left for the next attempt (its heartbeat on the server,
 * here a stand-in that keeps them).
 */
async function chatGateway(status: number) {
  let calls = 0;
  const server = createServer((_req, res) => {
    calls += 1;
    res.writeHead(status, { 'content-type': 'application/json', 'retry-after': '0' });
    res.end(JSON.stringify({ error: { message: status === 429 ? 'slow down' : 'upstream is down' } }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const gateway = new GatewayClient({
    baseUrl: `http://127.0.0.1:${port}/v1`,
    apiKey: () => 'sk-test',
    timeoutMs: 5000,
  });
  const outRoot = await mkdtemp(join(tmpdir(), 'vidbatch-enhance-'));
  return {
    gateway,
    outRoot,
    calls: () => calls,
    close: () => server.close(),
    attempt: (attempt: number, before?: EnhanceCounts) => attemptOf(gateway, outRoot, attempt, before),
  };
}

async function attemptOf(gateway: GatewayClient, outRoot: string, attempt: number, before?: EnhanceCounts) {
  const activities = createEnhanceActivities(gateway, outRoot);
  const input = { batchId: 'batch-0123456789abcdef', rowId: 'r1', prompt: 'a fox', enhance: settings };
  let kept: EnhanceCounts | undefined;
  const client = {
    workflowService: {
      recordActivityTaskHeartbeat: (req: {
        details: { payloads: Parameters<typeof defaultPayloadConverter.fromPayload>[0][] };
      }) => {
        kept = defaultPayloadConverter.fromPayload<EnhanceCounts>(req.details.payloads[0]!);
        return Promise.resolve({});
      },
    },
    options: { identity: 'test' },
    withAbortSignal: <R>(_signal: AbortSignal, fn: () => R) => fn(),
  } as unknown as Client;
  const failure = await new MockActivityEnvironment({ attempt, heartbeatDetails: before }, { client })
    .run((i: typeof input) => activities.enhancePrompt(i), input)
    .then(
      () => undefined,
      (err: unknown) => err as ApplicationFailure,
    );
  return { failure, kept };
}

describe('enhancePrompt counts only the chat requests it sent', () => {
  it('is retried after a 429, and ends the row enhance_failed once its 429s are spent', async () => {
    const g = await chatGateway(429);
    try {
      const early = await g.attempt(2, { failed: 0, limited: 1 });
      expect(early.failure?.nonRetryable).toBeFalsy();
      expect(early.kept).toEqual({ failed: 0, limited: 2 });
      // The 30th 429, whatever the attempt number: the attempt numbers of holds are not 429s.
      const last = await g.attempt(45, { failed: 0, limited: ENHANCE_MAX_RATE_LIMITED_ATTEMPTS - 1 });
      expect(last.failure?.type).toBe('EnhanceFailed');
      expect(last.failure?.nonRetryable).toBe(true);
      expect(last.failure?.message).toMatch(/answered 429 to the prompt's rewrite 30 times/);
      expect(g.calls()).toBe(2);
      expect(await readdir(g.outRoot)).toEqual([]); // nothing kept for a rewrite that never came
    } finally {
      g.close();
    }
  });

  it('a 5xx uses an attempt; 429s before it did not, so the fifth attempt is not the last', async () => {
    const g = await chatGateway(500);
    try {
      // Attempt 5, after three 429s and one failed request: the second failed request, retried.
      const after429s = await g.attempt(5, { failed: 1, limited: 3 });
      expect(after429s.failure).toMatchObject({ nonRetryable: false });
      expect(after429s.failure?.type).not.toBe('EnhanceFailed');
      expect(after429s.kept).toEqual({ failed: 2, limited: 3 });
      // The fifth request that failed ends the row.
      const fifth = await g.attempt(9, { failed: 4, limited: 3 });
      expect(fifth.failure).toMatchObject({ type: 'EnhanceFailed', nonRetryable: true });
      expect(fifth.failure?.message).toMatch(
        /the prompt's rewrite failed 5 times; last: POST \/chat\/completions: 500/,
      );
      expect(g.calls()).toBe(2);
    } finally {
      g.close();
    }
  });

  it("this worker's Retry-After hold sends nothing and uses no attempt; the attempts in all still end it", async () => {
    const g = await chatGateway(500);
    try {
      g.gateway.holds.hold('submit', 60_000);
      const held = await g.attempt(12, { failed: 4, limited: 29 });
      expect(held.failure).toMatchObject({ type: 'NotSent', nonRetryable: false });
      expect(held.kept).toEqual({ failed: 4, limited: 29 });
      const last = await g.attempt(ENHANCE_MAX_ATTEMPTS_IN_ALL, { failed: 4, limited: 29 });
      expect(last.failure).toMatchObject({ type: 'EnhanceFailed', nonRetryable: true });
      expect(last.failure?.message).toMatch(/could not be sent in 60 attempts/);
      expect(g.calls()).toBe(0);
    } finally {
      g.close();
    }
  });

  it('a refused connection sent nothing: retried without using an attempt, bounded by the attempts in all', async () => {
    const gateway = new GatewayClient({
      baseUrl: `http://127.0.0.1:${await freePort()}/v1`,
      apiKey: () => 'sk-test',
      timeoutMs: 500,
    });
    const outRoot = await mkdtemp(join(tmpdir(), 'vidbatch-enhance-'));
    const refused = await attemptOf(gateway, outRoot, 10, { failed: 4, limited: 0 });
    expect(refused.failure).toMatchObject({ nonRetryable: false });
    expect(refused.failure?.type).not.toBe('EnhanceFailed');
    expect(refused.kept).toEqual({ failed: 4, limited: 0 });
    const last = await attemptOf(gateway, outRoot, ENHANCE_MAX_ATTEMPTS_IN_ALL, { failed: 4, limited: 0 });
    expect(last.failure).toMatchObject({ type: 'EnhanceFailed', nonRetryable: true });
    expect(last.failure?.message).toMatch(/got no answer in 60 attempts/);
  });
});
