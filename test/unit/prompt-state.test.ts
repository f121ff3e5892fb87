import { describe, expect, it } from 'vitest';
import { FailureType } from '../../src/contract/failures';
import { DEFAULT_BATCH_OPTIONS } from '../../src/contract/batch-options';
import {
  isContentRefusal,
  JOB_GONE_CODE,
  NO_VIDEO_URL_CODE,
  promptSpendOptions,
  URL_EXPIRED_CODE,
  VIDEO_MISMATCH_CODE,
  type PromptInput,
} from '../../src/contract/prompt';
import {
  CAPACITY_WAIT_MAX_MS,
  PromptState,
  recheckReason,
  SUBMIT_UNKNOWN_CODE,
} from '../../src/workflows/prompt-state';

const row = { id: 'r1', line: 2, prompt: 'a fox', model: 'm', input: { prompt: 'a fox' }, parameters: {} };

/** A prompt's state as its batch would start it, with the batch's defaults. */
function prompt(input: Partial<PromptInput> = {}, now = 1000): PromptState {
  const options = DEFAULT_BATCH_OPTIONS;
  return new PromptState(
    {
      batchId: 'batch-1',
      row,
      poll: options.poll,
      jobDeadlineMs: 60_000,
      activityTimeoutMs: options.activityTimeoutMs,
      keyGeneration: 0,
      priorUnknownSubmits: 0,
      ...promptSpendOptions(options),
      ...input,
    },
    now,
  );
}

const unknown = {
  type: FailureType.SubmitUnknown,
  message: 'socket hang up',
  details: { code: 'submit_unknown' },
};
const submitted = { jobId: 'vid_1', submittedAt: 5000, attempts: 1 };

describe('PromptState', () => {
  it('resends an unknown submit outcome at most maxUnknownResends times, counting earlier runs', () => {
    const state = prompt({ maxUnknownResends: 2, priorUnknownSubmits: 1 });
    expect(state.submitFailed(unknown)).toEqual({ kind: 'unknown', resend: true });
    expect(state.submitFailed(unknown)).toEqual({ kind: 'unknown', resend: false });
    const fields = state.unknownFailed(unknown);
    expect(fields).toMatchObject({
      status: 'failed',
      errorCode: SUBMIT_UNKNOWN_CODE,
      attempts: 3,
      unknownSubmits: 3,
      generation: 0,
    });
    expect(fields.errorMessage).toContain('The outcome of 3 submit(s) is unknown');
    expect(fields.errorMessage).toContain('(resent 2 time(s), the most --max-unknown-resends allows)');
  });

  it('never resends with --on-unknown-submit fail', () => {
    const state = prompt({ onUnknownSubmit: 'fail' });
    expect(state.submitFailed(unknown)).toEqual({ kind: 'unknown', resend: false });
    expect(state.unknownFailed(unknown).errorMessage).toContain('(--on-unknown-submit fail: not re-sent)');
  });

  it('tells what a submit that brought no job id means next', () => {
    const state = prompt({ unreachablePauseMs: 30_000 });
    expect(
      state.submitFailed({
        type: FailureType.GatewayUnreachable,
        message: 'ECONNREFUSED',
        details: { sinceMs: 7 },
      }),
    ).toEqual({ kind: 'unreachable', sinceMs: 7, retryMs: 30_000 });
    expect(prompt().submitFailed({ type: FailureType.GatewayUnreachable, message: 'x' })).toEqual({
      kind: 'unreachable',
      retryMs: 60_000, // at most a minute
    });
    expect(
      state.submitFailed({ type: FailureType.RateLimited, message: '429', details: { retryAfterMs: 4000 } }),
    ).toEqual({ kind: 'capacity', retryAfterMs: 4000 });
    expect(state.submitFailed({ type: FailureType.Forbidden, message: '403' })).toEqual({ kind: 'blocked' });
    expect(state.submitFailed({ type: FailureType.Unauthorized, message: '401' })).toEqual({
      kind: 'blocked',
    });
    const refused = { type: FailureType.InvalidRequest, message: 'bad', details: { code: 'moderation' } };
    expect(state.submitFailed(refused)).toEqual({ kind: 'failed' });
    expect(state.submitRefused(refused, 'x')).toMatchObject({
      status: 'failed',
      errorCode: 'moderation',
      errorMessage: 'bad',
      attempts: 2, // this submit and the one refused with 429
    });
    expect(prompt().submitRefused(undefined, 'Error: boom')).toMatchObject({
      errorCode: 'submit_failed',
      errorMessage: 'Error: boom',
    });
  });

  it('counts 429s and unknown outcomes in the attempts of the job that came', () => {
    const state = prompt();
    state.submitFailed({ type: FailureType.RateLimited, message: '429', details: { retryAfterMs: 1000 } });
    state.submitFailed(unknown);
    expect(state.sent(submitted).attempts).toBe(3);
    expect(state.finished({ status: 'succeeded', url: 'https://v/1.mp4', polls: 2 })).toEqual({
      jobId: 'vid_1',
      attempts: 3,
      submittedAt: new Date(5000).toISOString(),
      status: 'succeeded',
      url: 'https://v/1.mp4',
      polls: 2,
      unknownSubmits: 1,
      generation: 0,
    });
  });

  it('waits for a slot at most the longer of twice the Retry-After and five minutes', () => {
    expect(PromptState.slotWaitMs(1000)).toBe(CAPACITY_WAIT_MAX_MS);
    expect(PromptState.slotWaitMs(400_000)).toBe(800_000);
  });

  it('checks a known job under the previous key generation, and submits with the next when it failed', () => {
    const failed = prompt({ knownJobId: 'vid_old', keyGeneration: 2 });
    expect(failed.generation).toBe(1);
    const generationFailed = { errorCode: 'generation_failed', errorMessage: 'the model failed' };
    expect(failed.checked({ state: 'failed', ...generationFailed })).toEqual({ kind: 'submit' });
    expect(failed.jobId).toBeUndefined();
    expect(failed.submitInput()).toMatchObject({
      generation: 2,
      batchId: 'batch-1',
      unreachableAfterMs: 120_000,
    });

    // Gone (404 or a status saying so): the row ends job_gone with its job id kept, nothing paid again.
    for (const check of [{ state: 'gone' as const }, { state: 'gone' as const, rawStatus: 'UNKNOWN' }]) {
      const gone = prompt({ knownJobId: 'vid_old', keyGeneration: 2 });
      const step = gone.checked(check);
      expect(step).toMatchObject({ kind: 'ended', outcome: { status: 'failed', errorCode: JOB_GONE_CODE } });
      if (step.kind !== 'ended') throw new Error('not ended');
      expect(step.outcome.errorMessage).toContain(check.rawStatus ? 'status "UNKNOWN"' : '404');
      expect(gone.finished(step.outcome)).toMatchObject({
        jobId: 'vid_old',
        errorCode: JOB_GONE_CODE,
        generation: 1,
      });
    }

    // Failed for its content: sent again unchanged it would be refused again; the row ends with the refusal.
    const refused = prompt({ knownJobId: 'vid_old', keyGeneration: 1 });
    const moderation = { errorCode: 'content_moderation', errorMessage: 'rejected by moderation' };
    expect(refused.checked({ state: 'failed', ...moderation })).toEqual({
      kind: 'ended',
      outcome: { status: 'failed', ...moderation, polls: 1 },
    });
    expect(refused.jobId).toBe('vid_old');

    const done = prompt({ knownJobId: 'vid_old', keyGeneration: 1 });
    expect(done.checked({ state: 'succeeded', url: 'https://v/o.mp4' })).toEqual({
      kind: 'succeeded',
      url: 'https://v/o.mp4',
    });
    expect(done.finished({ status: 'succeeded', url: 'https://v/o.mp4', polls: 1 })).toEqual({
      jobId: 'vid_old',
      attempts: 0,
      status: 'succeeded',
      url: 'https://v/o.mp4',
      polls: 1,
      generation: 0,
    });

    const noUrl = prompt({ knownJobId: 'vid_old', keyGeneration: 1 });
    expect(noUrl.checked({ state: 'no_url', errorMessage: 'no data[].url' })).toEqual({
      kind: 'noUrl',
      errorMessage: 'no data[].url',
    });
    expect(noUrl.noVideoUrl('no data[].url')).toMatchObject({
      jobId: 'vid_old',
      errorCode: NO_VIDEO_URL_CODE,
    });

    const running = prompt({ knownJobId: 'vid_old', keyGeneration: 1 });
    expect(running.checked({ state: 'unfinished', rawStatus: 'processing' })).toEqual({ kind: 'poll' });
    expect(running.polling(9000)).toEqual({ jobId: 'vid_old', submittedAt: 9000, attempts: 0 });
    expect(running.deadlineAt()).toBe(9000 + 60_000); // counts from the check: its submit time is unknown
    expect(running.checkFailed({ type: FailureType.Forbidden, message: '403' })).toBe('blocked');
    expect(running.checkRefused({ type: 'X', message: 'bad answer' }, 'x')).toMatchObject({
      jobId: 'vid_old',
      errorCode: 'check_failed',
    });
  });

  it('moves the deadline by the time paused, and first checks at the learned age when adaptive', () => {
    const state = prompt();
    state.sent({ ...submitted, firstCheckAgeMs: 20_000, spareCheckAgeMs: 8000 });
    state.pausedMs = 3000;
    expect(state.deadlineAt()).toBe(5000 + 60_000 + 3000);
    expect(state.firstCheck()).toEqual({ dueAt: 25_000, spareFrom: 13_000, known: true });

    const fixed = prompt({ poll: { ...DEFAULT_BATCH_OPTIONS.poll, adaptive: false, firstPollMs: 30_000 } });
    fixed.sent({ ...submitted, firstCheckAgeMs: 20_000, spareCheckAgeMs: 8000 });
    expect(fixed.firstCheck()).toEqual({ dueAt: 35_000, spareFrom: undefined, known: true });

    const early = prompt();
    early.sent(submitted); // before the worker learned the gateway's latency
    expect(early.firstCheck()).toMatchObject({
      dueAt: 5000 + DEFAULT_BATCH_OPTIONS.poll.firstPollMs,
      known: false,
    });

    const short = prompt({ jobDeadlineMs: 1000 });
    short.sent(submitted);
    expect(short.firstCheck().dueAt).toBe(5000 + 1000 + 100); // never after the deadline
  });

  it('ends a cancelled row with its job id when one is known, or says none is', () => {
    const waiting = prompt({ priorUnknownSubmits: 1 });
    expect(waiting.cancelled('waiting for Retry-After')).toMatchObject({
      status: 'failed',
      errorCode: 'cancelled',
      attempts: 1,
      errorMessage:
        'the batch was cancelled while waiting for Retry-After; no job id is known for this row ' +
        '(1 submit(s) with an unknown outcome may have made one)',
    });
    const polling = prompt();
    polling.sent({ ...submitted, journalError: 'EACCES' });
    expect(polling.cancelled('polling')).toEqual({
      jobId: 'vid_1',
      attempts: 1,
      submittedAt: new Date(5000).toISOString(),
      journalError: 'EACCES',
      status: 'failed',
      polls: 0,
      errorCode: 'cancelled',
      errorMessage:
        'the batch was cancelled while polling; job vid_1 was submitted and may still finish at the gateway',
      generation: 0,
    });
    expect(
      polling.pollRefused({ type: 'X', message: 'gone', details: { code: 'not_found' } }, 'x'),
    ).toMatchObject({ jobId: 'vid_1', errorCode: 'not_found', polls: 0 });
  });

  it('fails a mismatching video only with --verify strict, keeping job and file', () => {
    const got = {
      file: '/v/r1.mp4',
      sha256: 'ab',
      bytes: 10,
      verification: { ok: false, problems: ['duration 3.0 s, asked 5 s'] },
    };
    expect(prompt({ verify: 'flag' }).downloaded(got)).toEqual(got);
    expect(prompt({ verify: 'strict' }).downloaded(got)).toEqual({
      ...got,
      status: 'failed',
      errorCode: VIDEO_MISMATCH_CODE,
      errorMessage: 'the video differs from the request: duration 3.0 s, asked 5 s',
    });
    const ok = { ...got, verification: { ok: true, problems: [] } };
    expect(prompt({ verify: 'strict' }).downloaded(ok)).toEqual(ok);
    expect(prompt({ downloadDir: '/v' }).wantsDownload({ status: 'succeeded', url: 'u' })).toBe(true);
    expect(prompt({ downloadDir: '/v' }).wantsDownload({ status: 'failed' })).toBe(false);
  });

  it('downloads by default into the batch folder, and not with --no-download', () => {
    const done = { status: 'succeeded', url: 'u' } as const;
    // The client's defaults: every video is kept, beside the manifest.
    const state = prompt({ outDir: '/out/b' });
    expect(state.wantsDownload(done)).toBe(true);
    expect(state.videoTarget()).toEqual({
      name: 'r1.mp4',
      parameters: {},
      batchId: 'batch-1',
      outDir: '/out/b',
      maxBytes: DEFAULT_BATCH_OPTIONS.maxVideoBytes,
    });
    expect(prompt({ downloadDir: '/v/b' }).videoTarget()).toMatchObject({ dir: '/v/b' });
    expect(prompt({ download: false }).wantsDownload(done)).toBe(false);
    expect(prompt({ download: false, downloadDir: '/v' }).wantsDownload(done)).toBe(false);
  });

  it('asks the job again only for a URL that answered 403, 404 or 410; then fails url_expired, job kept', () => {
    const state = prompt();
    state.sent(submitted);
    expect(state.downloadFailed({ type: FailureType.UrlExpired, message: 'HTTP 403' })).toBe('expired');
    expect(state.downloadFailed({ type: FailureType.DownloadFailed, message: 'HTTP 500' })).toBe('recorded');
    expect(state.downloadFailed(undefined)).toBe('recorded');
    const fields = state.finished({ status: 'succeeded', url: 'u', polls: 2 });
    const expired = state.urlExpired(fields, 'u: HTTP 403; checked again, the job gave the same URL');
    expect(expired).toMatchObject({
      status: 'failed',
      errorCode: URL_EXPIRED_CODE,
      jobId: 'vid_1',
      url: 'u',
      polls: 2,
    });
    expect(expired.errorMessage).toContain('Job vid_1 is paid and kept');
    expect(recheckReason({ state: 'gone' })).toContain('no longer knows');
    expect(recheckReason({ state: 'gone', rawStatus: 'UNKNOWN' })).toContain('status "UNKNOWN"');
    expect(recheckReason({ state: 'unfinished', rawStatus: 'queued' })).toContain('"queued"');
  });

  it('builds the result from the row, the outcome and the finish time', () => {
    const state = prompt();
    state.sent(submitted);
    const result = state.result(state.finished({ status: 'failed', errorCode: 'moderation', polls: 1 }), 'T');
    expect(result).toEqual({
      rowId: 'r1',
      line: 2,
      prompt: 'a fox',
      model: 'm',
      input: { prompt: 'a fox' },
      parameters: {},
      jobId: 'vid_1',
      attempts: 1,
      submittedAt: new Date(5000).toISOString(),
      status: 'failed',
      errorCode: 'moderation',
      polls: 1,
      generation: 0,
      finishedAt: 'T',
    });
  });

  it("keeps the gateway's request id of the last answer about the row, from failure details or results", () => {
    const refused = prompt();
    const error = {
      type: FailureType.InvalidRequest,
      message: 'bad',
      details: { code: 'x', requestId: 'req-9' },
    };
    refused.submitFailed(error);
    expect(refused.submitRefused(error, 'x').requestId).toBe('req-9');

    const polled = prompt();
    polled.sent({ ...submitted, requestId: 'req-1' });
    expect(polled.cancelled('polling').requestId).toBe('req-1');
    expect(polled.finished({ status: 'succeeded', url: 'u', polls: 1, requestId: 'req-2' }).requestId).toBe(
      'req-2',
    );
    polled.pollFailed({ type: 'X', message: 'gone', details: { requestId: 'req-3' } });
    expect(polled.pollRefused(undefined, 'x').requestId).toBe('req-3');

    expect(prompt().cancelled('waiting to submit')).not.toHaveProperty('requestId');
  });
});

describe('isContentRefusal', () => {
  it("knows gateways' moderation and content-policy codes, however they are written", () => {
    const refusals = [
      'content_moderation',
      'content_policy_violation',
      'moderation_blocked',
      'DataInspectionFailed',
      'data_inspection_failed',
      'content-filter',
      'SAFETY_CHECK_FAILED',
    ];
    expect(refusals.filter((c) => !isContentRefusal(c))).toEqual([]);
    const others = [
      'generation_failed',
      'deadline_exceeded',
      'submit_unknown',
      'job_gone',
      'invalid_request',
      '',
    ];
    expect(others.filter((c) => isContentRefusal(c))).toEqual([]);
    expect(isContentRefusal(undefined)).toBe(false);
  });
});
