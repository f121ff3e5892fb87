// Claimed before paid, on the real dev server: at most one live claim per request; a claim released with a job
// makes every later claimer follow that job; one released without a job, or timed out, lets the next claimer pay.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { claimRequest, PaidElsewhere, type ClaimHolder } from '../../src/activities/request-claims';
import { NotSentError } from '../../src/gateway/errors';
import { testEnv, type TestEnv } from './helpers';

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const holder = (batchId: string, rowId: string): ClaimHolder => ({
  batchId,
  rowId,
  key: `vidbatch:${batchId}:${rowId}`,
});

describe('request claims', () => {
  it('one holder at a time; a job ends every later claim in following it', async () => {
    env = await testEnv();
    const { client } = env;
    const scope = randomUUID().replace(/-/g, '').slice(0, 8);
    const a = `batch-aaaaaaaaaaaaaaaa-${scope}`;
    const b = `batch-bbbbbbbbbbbbbbbb-${scope}`;
    const request = `${randomUUID().replace(/-/g, '').slice(0, 24)}/1`;
    const claimA = await claimRequest(client, {
      batchId: a,
      request,
      holder: holder(a, 'r1'),
      holdMs: 60_000,
    });
    // The same holder again (a retry of its submit) holds the same claim.
    expect(
      (await claimRequest(client, { batchId: a, request, holder: holder(a, 'r1'), holdMs: 60_000 })).id,
    ).toBe(claimA.id);
    // Another batch's row waits, then is told to try again later: nothing is sent meanwhile.
    const waited = Date.now();
    await expect(
      claimRequest(client, { batchId: b, request, holder: holder(b, 'r9'), holdMs: 60_000 }),
    ).rejects.toBeInstanceOf(NotSentError);
    expect(Date.now() - waited).toBeGreaterThanOrEqual(4_000);
    await claimA.release('vid_1');
    const followed = await claimRequest(client, {
      batchId: b,
      request,
      holder: holder(b, 'r9'),
      holdMs: 60_000,
    })
      .then(() => undefined)
      .catch((err: unknown) => err);
    expect(followed).toBeInstanceOf(PaidElsewhere);
    expect(followed).toMatchObject({ jobId: 'vid_1', holder: { batchId: a, rowId: 'r1' } });
    // A row whose job failed pays for a new one: it claims the next number, and that job is the one to follow.
    const again = await claimRequest(client, {
      batchId: a,
      request,
      holder: holder(a, 'r1'),
      holdMs: 60_000,
      replaces: 'vid_1',
    });
    expect(again.id).not.toBe(claimA.id);
    await again.release('vid_2');
    await expect(
      claimRequest(client, { batchId: b, request, holder: holder(b, 'r9'), holdMs: 60_000 }),
    ).rejects.toMatchObject({ jobId: 'vid_2' });
    // However many jobs failed before, the one that replaces the latest pays, and then is the one followed.
    const third = await claimRequest(client, {
      batchId: b,
      request,
      holder: holder(b, 'r9'),
      holdMs: 60_000,
      replaces: 'vid_2',
    });
    await third.release('vid_3');
    await expect(
      claimRequest(client, { batchId: a, request, holder: holder(a, 'r1'), holdMs: 60_000 }),
    ).rejects.toMatchObject({ jobId: 'vid_3', holder: { batchId: b, rowId: 'r9' } });
    // Another target's batch (another scope) never sees these claims.
    const other = `batch-bbbbbbbbbbbbbbbb-ffffffff`;
    const own = await claimRequest(client, {
      batchId: other,
      request,
      holder: holder(other, 'r9'),
      holdMs: 60_000,
    });
    await own.release(undefined, 'test');
  });

  it('a claim released without a job, or timed out, lets the next claimer pay', async () => {
    env = await testEnv();
    const { client } = env;
    const scope = randomUUID().replace(/-/g, '').slice(0, 8);
    const a = `batch-aaaaaaaaaaaaaaaa-${scope}`;
    const b = `batch-bbbbbbbbbbbbbbbb-${scope}`;
    const request = `${randomUUID().replace(/-/g, '').slice(0, 24)}/1`;
    const refused = await claimRequest(client, {
      batchId: a,
      request,
      holder: holder(a, 'r1'),
      holdMs: 60_000,
    });
    await refused.release(undefined, '429');
    const next = await claimRequest(client, { batchId: b, request, holder: holder(b, 'r2'), holdMs: 2_000 });
    expect(next.id).not.toBe(refused.id);
    // Its holder never releases it (a worker killed mid-POST): it times out on its own.
    await new Promise((r) => setTimeout(r, 4_000));
    const third = await claimRequest(client, {
      batchId: a,
      request,
      holder: holder(a, 'r3'),
      holdMs: 60_000,
    });
    expect(third.id).not.toBe(next.id);
    await third.release(undefined, 'test');
  });
});
