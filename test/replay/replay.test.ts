// Replays recorded histories of real batches through the current workflow code: a change that would break
// running workflows (non-determinism) fails here. One set, recorded from this major version by
// `npm run record-histories -- v1` (scripts/record-histories.ts); a change that breaks it must be versioned
// with patched() (and a new set recorded beside it) or wait for the next major version.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { SPARE_PRIORITY } from '../../src/contract/rate-budget';
import { workflowBundle } from '../integration/helpers';

const DIR = fileURLToPath(new URL('../fixtures/histories/', import.meta.url));

/** The JSON history as the Temporal CLI writes it: only what the coverage checks read. */
interface JsonEvent {
  eventType?: string;
  activityTaskScheduledEventAttributes?: {
    activityType: { name: string };
    priority?: { priorityKey?: number };
  };
  activityTaskFailedEventAttributes?: { failure?: { applicationFailureInfo?: { type?: string } } };
  signalExternalWorkflowExecutionInitiatedEventAttributes?: {
    signalName: string;
    input?: { payloads?: { data?: string }[] };
  };
  activityTaskCompletedEventAttributes?: { result?: { payloads?: { data?: string }[] } };
  workflowExecutionStartedEventAttributes?: { input?: { payloads?: { data?: string }[] } };
  workflowExecutionSignaledEventAttributes?: {
    signalName: string;
    input?: { payloads?: { data?: string }[] };
  };
}

const scheduled = (events: JsonEvent[], name: string) =>
  events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType.name === name);
const failedWith = (events: JsonEvent[], type: string) =>
  events.some((e) => e.activityTaskFailedEventAttributes?.failure?.applicationFailureInfo?.type === type);
const reported = (events: JsonEvent[], outcome: string) =>
  events.some((e) => {
    const s = e.signalExternalWorkflowExecutionInitiatedEventAttributes;
    const data = s?.input?.payloads?.[0]?.data;
    return (
      s?.signalName === 'promptSubmitOutcome' &&
      !!data &&
      (JSON.parse(Buffer.from(data, 'base64').toString()) as { outcome?: string }).outcome === outcome
    );
  });
/** A status check that found its job completed and fetched the video in the same attempt. */
const fetchedWithCheck = (events: JsonEvent[]) =>
  events.some((e) => {
    const data = e.activityTaskCompletedEventAttributes?.result?.payloads?.[0]?.data;
    if (!data) return false;
    const result = JSON.parse(Buffer.from(data, 'base64').toString()) as { download?: { ok?: boolean } };
    return result.download?.ok === true;
  });
const has = (events: JsonEvent[], type: string) => events.some((e) => e.eventType === type);
/** A batch run that took over prompts in flight and heard one of them end (the sliding window). */
const slidWindow = (events: JsonEvent[]) => {
  const data = events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]?.data;
  if (!data) return false;
  const input = JSON.parse(Buffer.from(data, 'base64').toString()) as {
    carry?: { window: { inFlight: string[] } };
  };
  const carried = new Set(input.carry?.window.inFlight ?? []);
  return events.some((e) => {
    const s = e.workflowExecutionSignaledEventAttributes;
    const result = s?.input?.payloads?.[0]?.data;
    return (
      s?.signalName === 'promptFinished' &&
      !!result &&
      carried.has((JSON.parse(Buffer.from(result, 'base64').toString()) as { rowId: string }).rowId)
    );
  });
};
/** Every row the batch's readRows activities returned (with what is known of each). */
const pageRows = (events: JsonEvent[]) =>
  events.flatMap((e) => {
    const data = e.activityTaskCompletedEventAttributes?.result?.payloads?.[0]?.data;
    if (!data) return [];
    const value = JSON.parse(Buffer.from(data, 'base64').toString()) as unknown;
    return Array.isArray(value) ? (value as { prior?: { reused?: object } }[]) : [];
  });

describe('replay of recorded histories', () => {
  it('replays every recorded batch, prompt and learner history without non-determinism', async () => {
    const files = (await readdir(DIR, { recursive: true })).filter((f) => f.endsWith('.json')).sort();
    expect(new Set(files.map((f) => f.split('/')[0]))).toEqual(new Set(['v1']));
    const histories = await Promise.all(
      files.map(async (f) => ({ file: f, json: JSON.parse(await readFile(join(DIR, f), 'utf8')) as object })),
    );

    // The set covers every path of the workflows (scripts/record-histories.ts).
    const prompts = histories
      .filter((h) => h.file.includes('/promptWorkflow'))
      .map((h) => (h.json as { events: JsonEvent[] }).events);
    const batches = histories
      .filter((h) => h.file.includes('/batchWorkflow'))
      .map((h) => (h.json as { events: JsonEvent[] }).events);
    const covered = {
      freshSubmit: prompts.some(
        (p) => scheduled(p, 'submitJob').length === 1 && scheduled(p, 'pollJob').length,
      ),
      knownJobCheck: prompts.some((p) => scheduled(p, 'checkJob').length > 0),
      unknownOutcomeResend: prompts.some(
        (p) => failedWith(p, 'SubmitUnknown') && scheduled(p, 'submitJob').length > 1,
      ),
      capacityWait: prompts.some((p) => failedWith(p, 'RateLimited') && reported(p, 'capacity')),
      spareCheck: prompts.some((p) =>
        scheduled(p, 'pollJob').some(
          (e) => e.activityTaskScheduledEventAttributes?.priority?.priorityKey === SPARE_PRIORITY,
        ),
      ),
      videoWithCheck: prompts.some(fetchedWithCheck),
      // A job submitted before the latency was known asks the worker (a local activity) when it is due.
      firstCheckAsk: prompts.some((p) => has(p, 'EVENT_TYPE_MARKER_RECORDED')),
      // C: the checks' attempts are too short to fetch a video with them; --verify strict fails a row.
      downloadActivity: prompts.some((p) => scheduled(p, 'downloadVideo').length > 0),
      refusedKey: prompts.some((p) => failedWith(p, 'Forbidden')),
      cancel: batches.some((b) => has(b, 'EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED')),
      continueAsNew: batches.some((b) => has(b, 'EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW')),
      slidingWindow: batches.some(slidWindow),
      learner: histories.some((h) => h.file.includes('/rateBudgetWorkflow')),
      reuse: batches.some((b) => pageRows(b).some((row) => row.prior?.reused)),
      enhance: prompts.some(
        (p) => scheduled(p, 'enhancePrompt').length > 0 && scheduled(p, 'submitJob').length > 0,
      ),
      enhanceFailed: prompts.some(
        (p) => failedWith(p, 'EnhanceFailed') && scheduled(p, 'submitJob').length === 0,
      ),
    };
    expect(covered).toEqual(Object.fromEntries(Object.keys(covered).map((k) => [k, true])));

    const results = [];
    for await (const result of Worker.runReplayHistories(
      { workflowBundle: await workflowBundle() },
      histories.map((h) => ({ workflowId: h.file, history: historyFromJSON(h.json) })),
    )) {
      results.push({ id: result.workflowId, error: result.error ? String(result.error) : undefined });
    }
    expect(results).toHaveLength(files.length);
    expect(results.filter((r) => r.error)).toEqual([]);
  });
});
