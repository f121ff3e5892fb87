// Notice URLs kept out of workflow input: what a batch carries for them (their origin and a reference), where
// `run` keeps them (beside the rows file, readable by their owner only), and the delivering activity reading one
// back by its reference: to the receiver's whole URL, or a visible failure when the worker cannot read it.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { createNoticeActivities, type DeliverNoticeInput } from '../../src/activities/notices';
import type { Notice } from '../../src/contract/notice';
import {
  keepNoticeUrls,
  keptNoticeUrl,
  noticeDestinations,
  noticeRef,
  noticeTo,
  noticeUrlKey,
} from '../../src/notices/notice-store';
import { LocalStore } from '../../src/store/local-store';

const SLACK = 'https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX';
const HOOK = 'https://example.com/hooks/vidbatch-0123';

describe('notice destinations', () => {
  it('a batch carries each URL as its origin and a reference, never the URL', () => {
    const { to, keep } = noticeDestinations([SLACK, HOOK], undefined);
    expect(to).toEqual([
      { shown: 'https://hooks.slack.com/…', ref: noticeRef(SLACK) },
      { shown: 'https://example.com/…', ref: noticeRef(HOOK) },
    ]);
    expect(JSON.stringify(to)).not.toContain('XXXXsecretXXXX');
    expect(keep).toEqual([SLACK, HOOK]);
    expect(noticeRef(SLACK)).toMatch(/^[0-9a-f]{32}$/);
    expect(noticeRef(SLACK)).not.toBe(noticeRef(HOOK));
  });

  it("a re-run without --notify keeps the batch's own; one from before references gets them, its URLs kept", () => {
    const own = [noticeTo(HOOK)];
    expect(noticeDestinations(undefined, own)).toEqual({ to: own, keep: [] });
    expect(noticeDestinations([], own)).toEqual({ to: own, keep: [] });
    const before = [{ url: SLACK, shown: 'https://hooks.slack.com/…' }, noticeTo(HOOK)];
    expect(noticeDestinations(undefined, before)).toEqual({
      to: [noticeTo(SLACK), noticeTo(HOOK)],
      keep: [SLACK],
    });
    // --notify given again replaces them.
    expect(noticeDestinations([HOOK], before)).toEqual({ to: [noticeTo(HOOK)], keep: [HOOK] });
    expect(noticeDestinations(undefined, undefined)).toEqual({ keep: [] });
  });

  it('kept beside the rows file, readable by its owner only, and read back only as the URL its reference names', async () => {
    const store = new LocalStore(await mkdtemp(join(tmpdir(), 'vidbatch-notify-')));
    await keepNoticeUrls(store, [SLACK, HOOK, SLACK]);
    await keepNoticeUrls(store, [SLACK]);
    const file = store.urlOf(noticeUrlKey(noticeRef(SLACK)));
    expect(file).toBe(join(store.url, '.notify', noticeRef(SLACK)));
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await keptNoticeUrl(store, noticeRef(SLACK))).toBe(SLACK);
    expect(await keptNoticeUrl(store, noticeRef(HOOK))).toBe(HOOK);
    expect(await keptNoticeUrl(store, noticeRef('https://elsewhere.example/x'))).toBeUndefined();
    // A file changed by hand is not another URL to send to.
    await writeFile(file, 'https://attacker.example/x');
    expect(await keptNoticeUrl(store, noticeRef(SLACK))).toBeUndefined();
    expect(() => noticeUrlKey('../../etc/passwd')).toThrow(/not a notice reference/);
  });
});

describe('deliverNotice', () => {
  const notice: Notice = {
    type: 'batch.completed',
    timestamp: '2026-11-27T03:10:00.000Z',
    data: {
      batchId: 'batch-1',
      csv: '/data/p.csv',
      event: 'completed',
      counts: { total: 0, succeeded: 0, failed: 0, inFlight: 0, notStarted: 0, reused: 0, skipped: 0 },
      failures: [],
    },
  };
  const attempt = (root: string, input: DeliverNoticeInput) =>
    new MockActivityEnvironment({ attempt: 1 })
      .run((i: DeliverNoticeInput) => createNoticeActivities(undefined, root).deliverNotice(i), input)
      .then(
        (n) => ({ delivered: n }),
        (err: Error & { nonRetryable?: boolean }) => ({ error: err.message, nonRetryable: err.nonRetryable }),
      );

  it('reads the URL by its reference from the root holding the batch folder; one it cannot find is retried', async () => {
    const paths: string[] = [];
    const server = createServer((req, res) => {
      paths.push(req.url ?? '');
      req.resume().on('end', () => res.writeHead(200).end());
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `slack+http://127.0.0.1:${(server.address() as AddressInfo).port}/slack/T1/B2/key3`;
    const root = await mkdtemp(join(tmpdir(), 'vidbatch-notify-'));
    try {
      const to = noticeTo(url);
      const input = { id: 'notice/batch-1/x-completed', notice, to, batchId: 'batch-1' };
      const missing = await attempt(root, input);
      expect(missing).toMatchObject({ nonRetryable: false });
      expect((missing as { error: string }).error).toContain(`slack+http://127.0.0.1:`);
      expect((missing as { error: string }).error).toContain(join(root, '.notify', to.ref!));
      expect((missing as { error: string }).error).not.toContain('key3');
      await keepNoticeUrls(new LocalStore(root), [url]);
      expect(await attempt(root, input)).toEqual({ delivered: 1 });
      // The batch's own folder named: its root holds the URLs.
      const elsewhere = await mkdtemp(join(tmpdir(), 'vidbatch-notify-'));
      expect(await attempt(elsewhere, { ...input, outDir: join(root, 'batch-1') })).toEqual({ delivered: 1 });
      // A notice scheduled before references names its URL itself.
      expect(await attempt(elsewhere, { id: input.id, notice, url })).toEqual({ delivered: 1 });
      expect(paths).toEqual(['/slack/T1/B2/key3', '/slack/T1/B2/key3', '/slack/T1/B2/key3']);
    } finally {
      server.close();
    }
  });
});
