// A heartbeat recorded on the Temporal server and waited for. `Context.heartbeat` is sent in the background and
// throttled: a worker killed just after it leaves no trace. What a retry must find (a submit that is sending, or
// has its job id; the attempts a rewrite counted) is recorded this way instead.
import type { Context } from '@temporalio/activity';
import { defaultPayloadConverter } from '@temporalio/common';

/** Records `details` as the attempt's heartbeat on the server, now; throws if the server did not take it. */
export async function recordHeartbeat(ctx: Context, details: unknown): Promise<void> {
  const { client, info } = ctx;
  await client.workflowService.recordActivityTaskHeartbeat({
    taskToken: info.taskToken,
    namespace: info.activityNamespace,
    identity: client.options.identity,
    details: { payloads: [defaultPayloadConverter.toPayload(details)] },
  });
}
