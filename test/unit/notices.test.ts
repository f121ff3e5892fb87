// A notice's body, its Slack text, how its URL is shown, the webhook secret's settings, and one delivery
// attempt as a Standard Webhooks receiver verifies it (the `standardwebhooks` package itself).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import type { NoticeRequest } from '../../src/contract/notice';
import { deliverOnce, DeliveryError, loadNoticeSecret } from '../../src/notices/deliver';
import { composeNotice, slackText } from '../../src/notices/notice-body';
import { isSlack, noticeUrlProblem, shownUrl } from '../../src/notices/notice-urls';
import { promptResult } from '../fixtures/prompt-result';

const SECRET = `whsec_${Buffer.from('a secret of thirty-two bytes!!!!').toString('base64')}`;

function request(outDir: string | undefined, over: Partial<NoticeRequest> = {}): NoticeRequest {
  return {
    id: 'notice/batch-1/abcdef01-completed',
    event: 'completed',
    batchId: 'batch-1',
    target: 'https://gateway.example',
    csvPath: '/data/prompts.csv',
    ...(outDir ? { outDir } : {}),
    counts: { total: 4, succeeded: 1, failed: 3, inFlight: 0, notStarted: 0, reused: 0, skipped: 0 },
    to: [],
    at: '2026-11-27T03:10:00.000Z',
    ...over,
  };
}

async function folder() {
  const dir = await mkdtemp(join(tmpdir(), 'vidbatch-notice-'));
  const lines = [
    promptResult('a', { status: 'succeeded', jobId: 'vid_a' }),
    promptResult('b', { status: 'failed', errorCode: 'content_moderation', jobId: 'vid_b' }),
    promptResult('c', { status: 'failed', errorCode: 'deadline_exceeded', jobId: 'vid_c' }),
    promptResult('d', { status: 'failed', errorCode: 'content_moderation', jobId: 'vid_d' }),
  ];
  await writeFile(join(dir, 'manifest.jsonl'), lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
  await writeFile(join(dir, 'jobs.jsonl'), '');
  return dir;
}

describe('notices', () => {
  it('compose the counts, the ledger, the failure classes by rows and the command that comes next', async () => {
    const dir = await folder();
    const notice = await composeNotice(request(dir));
    expect(notice).toMatchObject({
      type: 'batch.completed',
      timestamp: '2026-11-27T03:10:00.000Z',
      data: {
        batchId: 'batch-1',
        target: 'https://gateway.example',
        failures: [
          { code: 'content_moderation', rows: 2 },
          { code: 'deadline_exceeded', rows: 1 },
        ],
        manifest: join(dir, 'manifest.jsonl'),
        next: 'vidbatch retry-failed batch-1 --code content_moderation',
      },
    });
    expect(notice.data.report).toBe(join(dir, 'report.html'));
    expect(await readFile(join(dir, 'report.html'), 'utf8')).toContain('content_moderation');
    expect(notice.data.spend).toMatchObject({ kept: 1 });
    expect(notice.data.spend?.text).toMatch(/^jobs made: /);
    const paused = await composeNotice(
      request(dir, { event: 'paused', pauseKind: 'key', reason: 'the gateway refused the API key (401)' }),
    );
    expect(paused.data.next).toMatch(/^vidbatch resume batch-1 /);
    expect(paused.data.report).toBeUndefined(); // a pause: the batch goes on
    expect((await composeNotice(request(dir, { event: 'cancelled' }))).data.next).toBe(
      'vidbatch run /data/prompts.csv (goes on with the rows not finished)',
    );
    // A folder that cannot be read leaves out what only it knows, not the notice.
    const bare = await composeNotice(request(join(dir, 'missing')));
    expect(bare.data.failures).toEqual([]);
  });

  it('give Slack the same facts, one line each', async () => {
    const text = slackText(await composeNotice(request(await folder(), { reason: 'a guard rail' })));
    expect(text.split('\n')).toEqual([
      '*vidbatch: batch completed* batch-1',
      'why: a guard rail',
      'rows: 4 (1 succeeded, 3 failed, 0 in flight, 0 not started)',
      expect.stringMatching(/^spend: jobs made: /),
      'failures: content_moderation 2, deadline_exceeded 1',
      'target: https://gateway.example',
      expect.stringMatching(/^manifest: .*manifest\.jsonl$/),
      'next: vidbatch retry-failed batch-1 --code content_moderation',
    ]);
  });

  it('show a URL by its origin only, and tell a Slack webhook', () => {
    expect(shownUrl('https://hooks.slack.com/services/T000/B000/XXXX')).toBe('https://hooks.slack.com/…');
    expect(shownUrl('slack+http://127.0.0.1:9/hook?token=s')).toBe('slack+http://127.0.0.1:9/…');
    expect(isSlack('https://hooks.slack.com/services/T000/B000/XXXX')).toBe(true);
    expect(isSlack('slack+https://chat.example/hook')).toBe(true);
    expect(isSlack('https://example.com/hooks.slack.com')).toBe(false);
    expect(noticeUrlProblem('ftp://example.com/x')).toBe('must be an http(s) URL');
    expect(noticeUrlProblem('example.com/x')).toBe('is not a URL');
    expect(noticeUrlProblem('https://example.com/x')).toBeUndefined();
  });

  it('read the secret from the environment or a file, naming a bad one without its value', async () => {
    expect(loadNoticeSecret({})).toBeUndefined();
    expect(loadNoticeSecret({ VIDBATCH_NOTIFY_SECRET: SECRET })).toBe(SECRET);
    const file = join(await mkdtemp(join(tmpdir(), 'vidbatch-secret-')), 'secret');
    await writeFile(file, `${SECRET}\n`);
    expect(loadNoticeSecret({ VIDBATCH_NOTIFY_SECRET_FILE: file })).toBe(SECRET);
    expect(() => loadNoticeSecret({ VIDBATCH_NOTIFY_SECRET: 'whsec_not base64!' })).toThrow(
      /^VIDBATCH_NOTIFY_SECRET is not a webhook secret/,
    );
    expect(() => loadNoticeSecret({ VIDBATCH_NOTIFY_SECRET: 'whsec_not base64!' })).not.toThrow(
      /not base64!/,
    );
    expect(() => loadNoticeSecret({ VIDBATCH_NOTIFY_SECRET_FILE: join(file, 'none') })).toThrow(
      /VIDBATCH_NOTIFY_SECRET_FILE .* cannot be read: ENOTDIR/,
    );
  });

  it('deliver one attempt signed as Standard Webhooks receivers verify it; a refusal is retryable', async () => {
    const got: { headers: Record<string, string>; body: string }[] = [];
    let answer = 200;
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        got.push({ headers: req.headers as Record<string, string>, body });
        res.writeHead(answer).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    try {
      const notice = await composeNotice(request(undefined));
      await deliverOnce('notice/batch-1/x-completed', url, notice, SECRET);
      expect(new Webhook(SECRET).verify(got[0]!.body, got[0]!.headers)).toEqual(notice);
      expect(got[0]!.headers['webhook-id']).toBe('notice/batch-1/x-completed');
      answer = 503;
      const refused = await deliverOnce('id', url, notice, SECRET).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(DeliveryError);
      expect(refused).toMatchObject({
        retryable: true,
        message: `http://127.0.0.1:${new URL(url).port}/… answered HTTP 503`,
      });
      // No secret: signed notices cannot go, and no later attempt changes that.
      const unsigned = await deliverOnce('id', url, notice, undefined).catch((e: unknown) => e);
      expect(unsigned).toMatchObject({ retryable: false });
      expect(got).toHaveLength(2);
    } finally {
      server.close();
    }
  });
});
