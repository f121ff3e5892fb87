// The second Worker of every vidbatch worker process: it polls the gateway activity queue
// (`<taskQueue>-gateway`, contract/rate-budget.ts), whose server-side rate limit is the gateway budget of all
// workers together, and runs submitJob and pollJob there with the same activity instances (and so the same
// Retry-After holds and latency estimate) as the rest of the process. It reports what it sees to the queue's learner
// workflow (workflows/rate-budget.ts): dispatches, requests by kind and 429s with their Retry-After. It starts the
// learner on its first gateway dispatch, not at start, and watches the queue's limit (queue-watchdog.ts).
import { Client } from '@temporalio/client';
import { ApplicationFailure, type SignalDefinition } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time';
import {
  Runtime,
  Worker,
  type ActivityExecuteInput,
  type ActivityInboundCallsInterceptor,
  type NativeConnection,
  type Next,
} from '@temporalio/worker';
import { Context } from '@temporalio/activity';
import type { Activities } from '../activities';
import { FailureType } from '../contract/failures';
import {
  gatewayQueue,
  nudgeSignal,
  pinRateSignal,
  rateBudgetWorkflowId,
  rateReportSignal,
  type RateReport,
} from '../contract/rate-budget';
import { shutdownForceMs, type WorkerVersion } from '../config';
import { ConfigError } from '../errors';
import type { GatewayClient } from '../gateway/client';
import type { CallKind } from '../gateway/retry-after-hold';
import type { rateBudgetWorkflow } from '../workflows/rate-budget';
import { REPORT_INTERVAL_MS } from '../workflows/rate-learner';
import { QueueWatchdog } from './queue-watchdog';
import { deploymentOptions } from './versioning';

/** `worker --gateway-rps` / VIDBATCH_GATEWAY_RPS: a limit the gateway publishes; unset = learn it. */
export function loadGatewayRps(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.VIDBATCH_GATEWAY_RPS?.trim();
  if (!raw) return undefined;
  const rps = Number(raw);
  if (!Number.isFinite(rps) || rps <= 0)
    throw new ConfigError(`VIDBATCH_GATEWAY_RPS (--gateway-rps) must be a positive number, got "${raw}"`);
  return rps;
}

export interface GatewayWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  /** The main task queue; the gateway queue and the learner's id derive from it. */
  taskQueue: string;
  gateway: GatewayClient;
  /** The gateway calls, built with the main worker's activities so they share their state. */
  activities: Pick<Activities, 'submitJob' | 'checkJob' | 'pollJob' | 'stopJob' | 'enhancePrompt'>;
  /** Pin the queue's limit (requests/second); undefined lets the learner learn it. */
  gatewayRps?: number;
  maxConcurrentActivities?: number;
  /** As the main worker's: running gateway calls get this long to finish on shutdown (ms). */
  shutdownGraceMs?: number;
  /** As the main worker's: a pinned prompt's gateway calls go to its own build's workers. */
  version?: WorkerVersion;
}

/** The share of a published limit the queue is pinned at (the server's burst after idle needs the room). */
const PUBLISHED_SHARE = 0.95;

const empty = (worker: string): RateReport => ({
  worker,
  dispatched: 0,
  answered: { submit: 0, status: 0 },
  rateLimited: { submit: 0, status: 0 },
  retryAfterMs: 0,
});

/**
 * Counts this process's gateway calls and signals them to the learner: once a second, at once on a 429. The
 * first signal, on the worker's first gateway dispatch, starts the learner if needed and carries this worker's
 * pin (`--gateway-rps`, or none): the last worker to make its first gateway call wins.
 */
export class RateReporter {
  private report: RateReport;
  private timer: ReturnType<typeof setInterval> | undefined;
  private sending: Promise<void> = Promise.resolve();
  private warned = false;
  private pin: number | null = null;
  private pinSent = false;
  /** The pin last sent for the gateway's published limit. */
  private publishedPin: number | undefined;

  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
    private readonly identity: string,
  ) {
    this.report = empty(identity);
  }

  private get gatewayQueue(): string {
    return gatewayQueue(this.taskQueue);
  }

  /** Starts reporting; nothing is signalled until the first gateway dispatch, which carries `gatewayRps`. */
  start(gatewayRps: number | undefined): void {
    this.pin = gatewayRps ?? null;
    this.timer = setInterval(() => void this.flush(), REPORT_INTERVAL_MS);
    this.timer.unref();
  }

  /** `batch`: the activity's fairness key (its batch), for each batch's share. */
  dispatched(batch: string | undefined): void {
    if (!this.pinSent) {
      this.pinSent = true;
      // Ahead of the first report, in order; if it fails, the next dispatch tries again.
      void this.enqueue(
        () => this.signal(pinRateSignal, { worker: this.identity, rps: this.pin }),
        () => {
          this.pinSent = false;
        },
      );
    }
    this.report.dispatched += 1;
    if (batch !== undefined) {
      const byBatch = (this.report.byBatch ??= {});
      byBatch[batch] = (byBatch[batch] ?? 0) + 1;
    }
  }

  /**
   * The gateway published its limit (RateLimit-Policy): the queue is pinned a little under it, as a learned
   * limit settles under a confirmed ceiling, unless this worker has an operator's pin. Told again only when it
   * changes.
   */
  published(rps: number): void {
    if (this.pin !== null) return;
    const pin = Math.round(rps * PUBLISHED_SHARE * 100) / 100;
    if (pin === this.publishedPin) return;
    this.publishedPin = pin;
    void this.enqueue(
      () => this.signal(pinRateSignal, { worker: this.identity, rps: pin, by: 'gateway' }),
      () => {
        this.publishedPin = undefined;
      },
    );
  }

  sent(kind: CallKind): void {
    this.report.answered[kind] += 1; // corrected below if it turns out to be a 429
  }

  rateLimited(kind: CallKind, retryAfterMs: number): void {
    this.report.answered[kind] = Math.max(0, this.report.answered[kind] - 1);
    this.report.rateLimited[kind] += 1;
    this.report.retryAfterMs = Math.max(this.report.retryAfterMs, retryAfterMs);
    void this.flush();
  }

  /** Sends what was counted since the last report, if anything; reports go one at a time, in order. */
  flush(): Promise<void> {
    const r = this.report;
    if (
      r.dispatched + r.answered.submit + r.answered.status + r.rateLimited.submit + r.rateLimited.status ===
      0
    )
      return this.sending;
    this.report = empty(this.identity);
    return this.enqueue(() => this.signal(rateReportSignal, r));
  }

  /** The watchdog's signal: the queue is stranded at 0; starts a learner if none runs. Throws on failure. */
  nudge(why: string): Promise<void> {
    return this.signal(nudgeSignal, { worker: this.identity, why });
  }

  private enqueue(send: () => Promise<void>, onError?: () => void): Promise<void> {
    this.sending = this.sending.then(send).catch((err: unknown) => {
      // Counts are lost, the limit stays as it is; the worker goes on.
      onError?.();
      if (!this.warned)
        Runtime.instance().logger.warn('could not report to the rate-budget learner', {
          error: String(err),
        });
      this.warned = true;
    });
    return this.sending;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private async signal<A>(signal: SignalDefinition<[A]>, arg: A): Promise<void> {
    await this.client.workflow.signalWithStart<typeof rateBudgetWorkflow, [A]>('rateBudgetWorkflow', {
      workflowId: rateBudgetWorkflowId(this.gatewayQueue),
      taskQueue: this.taskQueue,
      args: [{ gatewayQueue: this.gatewayQueue }],
      signal,
      signalArgs: [arg],
    });
    this.warned = false;
  }
}

/** The Retry-After a RateLimited failure carries: in its details on submit, as its retry delay on poll. */
function retryAfterOf(failure: ApplicationFailure): number {
  const details = failure.details?.[0] as { retryAfterMs?: number } | undefined;
  if (typeof details?.retryAfterMs === 'number') return details.retryAfterMs;
  return failure.nextRetryDelay !== undefined ? msToNumber(failure.nextRetryDelay) : 1000;
}

/** Counts every dispatch (each takes a token of the queue's limit) and every 429, by kind. */
class ReportingInterceptor implements ActivityInboundCallsInterceptor {
  constructor(private readonly reporter: RateReporter) {}

  async execute(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>) {
    this.reporter.dispatched(Context.current().info.priority?.fairnessKey);
    try {
      return await next(input);
    } catch (err) {
      if (err instanceof ApplicationFailure && err.type === FailureType.RateLimited) {
        // A chat call is a POST like a submit: the worker holds both on its 429 (gateway/client.ts).
        const type = Context.current().info.activityType;
        const kind: CallKind = type === 'submitJob' || type === 'enhancePrompt' ? 'submit' : 'status';
        this.reporter.rateLimited(kind, retryAfterOf(err));
      }
      throw err;
    }
  }
}

/**
 * Creates the gateway Worker next to `main` and returns `main`, whose run() now runs both (and ends both
 * when either ends) and whose shutdown() shuts down both, so callers keep handling one Worker.
 */
export async function withGatewayWorker(main: Worker, options: GatewayWorkerOptions): Promise<Worker> {
  const client = new Client({ connection: options.connection, namespace: options.namespace });
  const identity = client.options.identity;
  const reporter = new RateReporter(client, options.taskQueue, identity);
  // Every request this process sends counts towards the learner's view of the rate.
  options.gateway.onRequest = (kind) => reporter.sent(kind);
  options.gateway.onPublishedRate = (rps) => reporter.published(rps);
  const gateway = await Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: gatewayQueue(options.taskQueue),
    activities: {
      submitJob: options.activities.submitJob,
      checkJob: options.activities.checkJob,
      pollJob: options.activities.pollJob,
      stopJob: options.activities.stopJob,
      enhancePrompt: options.activities.enhancePrompt,
    },
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivities ?? 200,
    interceptors: { activity: [() => ({ inbound: new ReportingInterceptor(reporter) })] },
    ...(options.shutdownGraceMs !== undefined
      ? {
          shutdownGraceTime: options.shutdownGraceMs,
          shutdownForceTime: shutdownForceMs(options.shutdownGraceMs, options.gateway),
        }
      : {}),
    ...(options.version ? { workerDeploymentOptions: deploymentOptions(options.version) } : {}),
  });
  reporter.start(options.gatewayRps);
  const watchdog = new QueueWatchdog({
    client,
    namespace: options.namespace,
    gatewayQueue: gatewayQueue(options.taskQueue),
    nudge: (why) => reporter.nudge(why),
    logger: Runtime.instance().logger,
    ...(options.gatewayRps !== undefined ? { pinnedRps: options.gatewayRps } : {}),
  });

  const runMain = main.run.bind(main);
  const shutdownMain = main.shutdown.bind(main);
  const shutdownGateway = gateway.shutdown.bind(gateway);
  // Whichever worker the Runtime's signal handling stops first, nothing new goes to the gateway from then
  // on (calls on the wire go on to their answer).
  gateway.shutdown = () => {
    options.gateway.stop();
    shutdownGateway();
  };
  const shutdownBoth = () => {
    watchdog.stop();
    options.gateway.stop();
    if (main.getState() === 'RUNNING') shutdownMain();
    if (gateway.getState() === 'RUNNING') gateway.shutdown();
  };
  main.shutdown = shutdownBoth;
  // Callers see one worker: its running activities are both workers' (gateway calls run on the second).
  const statusMain = main.getStatus.bind(main);
  main.getStatus = () => {
    const status = statusMain();
    return {
      ...status,
      numInFlightActivities: status.numInFlightActivities + gateway.getStatus().numInFlightActivities,
    };
  };
  main.run = async () => {
    watchdog.start();
    const results = await Promise.allSettled([
      runMain().finally(shutdownBoth),
      gateway.run().finally(shutdownBoth),
    ]);
    watchdog.stop();
    await reporter.stop();
    for (const r of results) if (r.status === 'rejected') throw r.reason;
  };
  return main;
}
