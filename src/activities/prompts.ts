// What became of prompts that ended without their batch hearing of it (terminated by someone, or their end
// signal lost): the batch asks now and then about those an earlier run of it started, as no run after that one
// is told when they close. A prompt still checking its job for a late video after its row ended has ended its
// row. Uses the worker's own client, so it needs no settings.
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import {
  promptWorkflowId,
  workflowFailedResult,
  type PromptInput,
  type PromptResult,
} from '../contract/prompt';
import { rowEndedQuery } from '../contract/messages';
import { MAX_PAGE_BYTES, rowFields } from '../contract/rows';
import { StateAttr } from '../contract/search-attributes';

export interface EndedPromptsInput {
  batchId: string;
  rowIds: string[];
}

/** Prompts described at once. */
const AT_ONCE = 20;

export function createPromptActivities() {
  return {
    /** The results of those of `rowIds` whose prompts have ended (as much as one payload holds). */
    async endedPrompts({ batchId, rowIds }: EndedPromptsInput): Promise<PromptResult[]> {
      const { client } = Context.current();
      const ended: PromptResult[] = [];
      let bytes = 0;
      for (let i = 0; i < rowIds.length && bytes < MAX_PAGE_BYTES; i += AT_ONCE) {
        const found = await Promise.all(
          rowIds.slice(i, i + AT_ONCE).map((rowId) => endedPrompt(client, promptWorkflowId(batchId, rowId))),
        );
        for (const result of found) {
          if (!result) continue;
          ended.push(result);
          bytes += JSON.stringify(result).length;
        }
        Context.current().heartbeat();
      }
      return ended;
    },
  };
}

async function endedPrompt(client: Client, workflowId: string): Promise<PromptResult | undefined> {
  const handle = client.workflow.getHandle(workflowId);
  const description = await handle.describe().catch((err: unknown) => {
    if (err instanceof WorkflowNotFoundError) return undefined; // past the namespace's retention: nothing to read
    throw err;
  });
  if (!description) return undefined;
  if (description.status.name === 'RUNNING') {
    // Its row ended, and it watches its job for a late video (workflows/late-video.ts): the row's end is what
    // the batch waits for, not the watch's.
    if (description.typedSearchAttributes.get(StateAttr) !== 'late') return undefined;
    return handle.query(rowEndedQuery).catch(() => undefined);
  }
  const { status, closeTime } = description;
  if (status.name === 'COMPLETED') return (await handle.result()) as PromptResult;
  const history = await handle.fetchHistory();
  const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  if (!payload) return undefined;
  const { row } = defaultPayloadConverter.fromPayload<PromptInput>(payload);
  return workflowFailedResult(
    rowFields(row),
    `its prompt workflow was ${status.name.toLowerCase().replace('_', ' ')}`,
    (closeTime ?? new Date()).toISOString(),
  );
}
