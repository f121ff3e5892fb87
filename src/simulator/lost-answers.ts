// Faults that hit a /v1 answer after the request was processed: the connection dropped, a proxy's 502 or
// 504 or header-echoing 500 page, an answer too late for the client, an unreadable 2xx. The gateway did the
// work (a submit made and billed a job) but the client cannot know: such a submit is counted as ambiguous.
// What did reach the client intact is recorded on the job (`idDelivered`, `resultDelivered`).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AfterProcessingFault } from './fault-settings';
import { headerEchoPage } from './header-echo';
import { errorBody, send, waitUnlessClosed, type V1Result } from './http';
import type { SimulatorState } from './state';

/**
 * Sends a processed /v1 answer through the after-processing faults. Returns the status the client saw
 * (0 = none). On a submit that created a job, a lost answer is counted as an ambiguous submit.
 */
export async function answerV1(
  state: SimulatorState,
  req: IncomingMessage,
  res: ServerResponse,
  result: V1Result,
  faulty: boolean,
): Promise<number> {
  const lost = (fault: AfterProcessingFault) => {
    if (result.created) state.countAmbiguousSubmit(fault);
  };
  if (faulty && state.roll('drop')) {
    lost('drop');
    req.socket.destroy();
    return 0;
  }
  for (const [fault, status] of [
    ['error502After', 502],
    ['error504After', 504],
  ] as const) {
    if (faulty && state.roll(fault)) {
      lost(fault);
      const message = status === 502 ? 'Bad gateway.' : 'Gateway timeout.';
      send(res, status, errorBody(status === 502 ? 'bad_gateway' : 'gateway_timeout', message));
      return status;
    }
  }
  if (faulty && state.roll('echoHeaders500')) {
    lost('echoHeaders500');
    state.stats.headerEchoPages += 1;
    const page = headerEchoPage(req);
    res.writeHead(500, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(page) });
    res.end(page);
    return 500;
  }
  if (faulty && state.roll('slow') && (await waitUnlessClosed(res, state.faults.slowMs))) {
    lost('slow'); // the client gave up before the late answer
    return 0;
  }
  if (faulty && state.roll('malformed')) {
    lost('malformed');
    send(res, result.status, undefined, {}, '{"id": "vid_');
    return result.status;
  }
  const { job } = result;
  if (job) {
    // Counted only once the answer is out: what the client could not read, it does not know.
    res.once('finish', () => {
      job.idDelivered = true;
      if (result.carriesResult) job.resultDelivered = true;
    });
  }
  send(res, result.status, result.body);
  return result.status;
}
