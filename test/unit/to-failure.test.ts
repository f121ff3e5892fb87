import { ApplicationFailureCategory } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import {
  csvChanged,
  downloadFailed,
  gatewayUnreachable,
  jobNotFinished,
  notSent,
  submitUnknown,
  toFailure,
} from '../../src/activities/to-failure';
import { FailureType, NON_RETRYABLE, RETRY_POLICIES } from '../../src/contract/failures';
import { DownloadError } from '../../src/errors';
import {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  ConnectionError,
  KeyRefusedError,
  MalformedResponseError,
  NotFoundError,
  NotSentError,
  PermissionDeniedError,
  RateLimitError,
  ServerError,
  TimeoutError,
} from '../../src/gateway/errors';

describe('toFailure', () => {
  it('ends auth, not-found and invalid requests at once, with the gateway code where the workflow needs it', () => {
    for (const activity of ['submitJob', 'pollJob'] as const) {
      const unauthorized = toFailure(new AuthenticationError('POST /x: 401', 401), activity);
      expect(unauthorized).toMatchObject({ type: FailureType.Unauthorized, nonRetryable: true });
      expect(unauthorized.message).toBe('POST /x: 401');
      expect(toFailure(new PermissionDeniedError('403', 403), activity)).toMatchObject({
        type: FailureType.Forbidden,
        nonRetryable: true,
      });
      expect(toFailure(new NotFoundError('404', 404), activity)).toMatchObject({
        type: FailureType.NotFound,
        nonRetryable: true,
        details: [{ code: 'not_found' }],
      });
      expect(toFailure(new BadRequestError('400', 400, 'content_moderation'), activity)).toMatchObject({
        type: FailureType.InvalidRequest,
        nonRetryable: true,
        details: [{ code: 'content_moderation' }],
      });
    }
  });

  it('hands a 429 on submit to the workflow with its wait, and lets Temporal wait it out on poll', () => {
    const submit = toFailure(new RateLimitError('429', 7000), 'submitJob');
    expect(submit).toMatchObject({
      type: FailureType.RateLimited,
      nonRetryable: true,
      details: [{ retryAfterMs: 7000 }],
    });
    const poll = toFailure(new RateLimitError('429', 7000), 'pollJob', 2000);
    expect(poll).toMatchObject({ type: FailureType.RateLimited, nonRetryable: false, nextRetryDelay: 7000 });
    // The check was due: it goes again when the Retry-After is up, not at the next poll delay.
    expect(toFailure(new RateLimitError('429', 500), 'pollJob', 2000).nextRetryDelay).toBe(500);
  });

  it('waits one second after a 429 without Retry-After', () => {
    expect(toFailure(new RateLimitError('429', undefined), 'submitJob').details).toEqual([
      { retryAfterMs: 1000 },
    ]);
    expect(toFailure(new RateLimitError('429', undefined), 'pollJob').nextRetryDelay).toBe(1000);
  });

  it('hands a submit whose outcome is unknown to the workflow, and retries the same errors on poll', () => {
    for (const err of [
      new ServerError('503', 503),
      new TimeoutError('slow'),
      new ConnectionError('reset'),
      new MalformedResponseError('bad json', 200),
    ]) {
      expect(toFailure(err, 'submitJob')).toMatchObject({
        type: FailureType.SubmitUnknown,
        nonRetryable: true,
        details: [{ code: 'submit_unknown' }],
      });
      const poll = toFailure(err, 'pollJob', 4500);
      expect(poll).toMatchObject({ type: err.name, nonRetryable: false, nextRetryDelay: 4500 });
    }
  });

  it('hands a 409 on submit to the workflow as an unknown outcome; on a status check it stays a refusal', () => {
    // An idempotent gateway answers 409 while a request with the same key is in progress: a job may exist.
    const conflict = new ConflictError('POST /videos/generations: 409 in progress', 409, 'conflict');
    expect(toFailure(conflict, 'submitJob')).toMatchObject({
      type: FailureType.SubmitUnknown,
      nonRetryable: true,
      details: [{ code: 'submit_unknown' }],
      category: ApplicationFailureCategory.BENIGN,
    });
    for (const activity of ['pollJob', 'checkJob'] as const)
      expect(toFailure(conflict, activity)).toMatchObject({
        type: FailureType.InvalidRequest,
        nonRetryable: true,
        details: [{ code: 'conflict' }],
      });
  });

  it('retries a submit that provably sent nothing, and errors from before sending', () => {
    for (const err of [new ConnectionError('refused', true), new Error('something else')]) {
      const submit = toFailure(err, 'submitJob');
      expect(submit.nonRetryable).toBe(false);
      expect(submit.type).toBe(err.name);
      expect(submit.nextRetryDelay).toBeUndefined();
    }
  });

  it('refuses locally with the type of the refusal, so a refused key pauses the batch as before', () => {
    expect(toFailure(new KeyRefusedError('not sent', 403), 'submitJob')).toMatchObject({
      type: FailureType.Forbidden,
      nonRetryable: true,
    });
    expect(toFailure(new KeyRefusedError('not sent', 401), 'pollJob')).toMatchObject({
      type: FailureType.Unauthorized,
      nonRetryable: true,
    });
    expect(toFailure(new KeyRefusedError('not sent', 403), 'checkJob').type).toBe(FailureType.Forbidden);
  });

  it('submitUnknown (an attempt ended mid-POST) goes to the workflow with the row code', () => {
    expect(submitUnknown('crashed while sending')).toMatchObject({
      type: FailureType.SubmitUnknown,
      nonRetryable: true,
      details: [{ code: 'submit_unknown' }],
    });
  });

  it("puts the gateway's request id into the details beside the code, and the message keeps it", () => {
    const id = 'req_0123456789abcdef01234567';
    expect(toFailure(new NotFoundError('404', 404, 'not_found', id), 'pollJob')).toMatchObject({
      type: FailureType.NotFound,
      details: [{ code: 'not_found', requestId: id }],
    });
    const invalid = toFailure(new BadRequestError('400', 400, 'content_moderation', id), 'submitJob');
    expect(invalid.details).toEqual([{ code: 'content_moderation', requestId: id }]);
    expect(invalid.message).toBe(`400 (request id ${id})`);
    // A proxy's 502 on submit: the outcome is unknown, and the id is what the gateway's operators can trace.
    expect(toFailure(new ServerError('502', 502, undefined, id), 'submitJob').details).toEqual([
      { code: 'submit_unknown', requestId: id },
    ]);
    expect(
      toFailure(new RateLimitError('429', 7000, 'rate_limited', undefined, id), 'submitJob').details,
    ).toEqual([{ retryAfterMs: 7000, requestId: id }]);
    expect(toFailure(new AuthenticationError('401', 401, 'unauthorized', id), 'submitJob').details).toEqual([
      { requestId: id },
    ]);
    // Retried by Temporal: the last attempt's failure still says which request it was.
    const retried = toFailure(new ServerError('500', 500, 'internal_error', id), 'pollJob', 2000);
    expect(retried).toMatchObject({
      nonRetryable: false,
      nextRetryDelay: 2000,
      details: [{ requestId: id }],
    });
    // No id (no answer, or none sent): the details are what they were.
    expect(toFailure(new TimeoutError('slow'), 'submitJob').details).toEqual([{ code: 'submit_unknown' }]);
    expect(toFailure(new TimeoutError('slow'), 'pollJob').details).toBeUndefined();
    expect(toFailure(new AuthenticationError('401', 401), 'pollJob').details).toBeUndefined();
  });

  it('marks non-retryable exactly the types the retry policies list', () => {
    const errors = [
      new AuthenticationError('401', 401),
      new PermissionDeniedError('403', 403),
      new NotFoundError('404', 404),
      new BadRequestError('400', 400),
      new RateLimitError('429', 1000),
      new ServerError('500', 500),
      new TimeoutError('slow'),
      new KeyRefusedError('not sent', 401),
    ];
    const policies = {
      submitJob: RETRY_POLICIES.submitJob.nonRetryableErrorTypes,
      checkJob: RETRY_POLICIES.checkJob.nonRetryableErrorTypes,
      pollJob: RETRY_POLICIES.pollJob(1000).nonRetryableErrorTypes,
    };
    for (const activity of ['submitJob', 'checkJob', 'pollJob'] as const) {
      // NotFound on checkJob is an answer (the job is gone), not a failure the activity throws.
      const thrown = activity === 'checkJob' ? errors.filter((e) => !(e instanceof NotFoundError)) : errors;
      // A submit that could not be sent for too long is decided by the activity, not by toFailure.
      const own = activity === 'submitJob' ? [gatewayUnreachable('connection refused', 0)] : [];
      const nonRetryable = [...thrown.map((e) => toFailure(e, activity)), ...own].filter(
        (f) => f.nonRetryable,
      );
      expect([...new Set(nonRetryable.map((f) => f.type))].sort()).toEqual(
        [...NON_RETRYABLE[activity]].sort(),
      );
      expect([...(policies[activity] ?? [])].sort()).toEqual([...NON_RETRYABLE[activity]].sort());
    }
    expect(csvChanged('changed')).toMatchObject({ type: FailureType.CsvChanged, nonRetryable: true });
    expect(RETRY_POLICIES.batch.nonRetryableErrorTypes).toEqual([FailureType.CsvChanged]);
  });
});

describe('benign and local failures', () => {
  it('a call not sent (a hold) and an unfinished job are benign retries at the given delay', () => {
    expect(notSent(new NotSentError(2500))).toMatchObject({
      type: FailureType.NotSent,
      nonRetryable: false,
      nextRetryDelay: 2500,
      category: ApplicationFailureCategory.BENIGN,
    });
    expect(jobNotFinished('job j is running', 800)).toMatchObject({
      type: FailureType.JobNotFinished,
      nonRetryable: false,
      nextRetryDelay: 800,
      category: ApplicationFailureCategory.BENIGN,
    });
  });

  it('a failed download is retried only when trying again can help', () => {
    expect(downloadFailed(new DownloadError('HTTP 503', true))).toMatchObject({
      type: FailureType.DownloadFailed,
      nonRetryable: false,
    });
    expect(downloadFailed(new DownloadError('HTTP 410 (link expired)', false)).nonRetryable).toBe(true);
  });
});
