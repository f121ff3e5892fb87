// `vidbatch simulator`.
import { type Command, Option } from 'commander';
import { fraction, nonNegative, number, numberIn, port, waitForCtrlC, wholeNumber } from '../support';

/** simulator/settings' MAX_REDIRECT_HOPS, for the help text: `--help` must not load the simulator. */
export const MAX_REDIRECT_HOPS_HELP = 5;

/** Help headings of the simulator's option groups; the rarer faults and knobs are hidden (docs/cli.md). */
const GROUP = {
  server: 'Server:',
  jobs: 'Jobs:',
  urls: 'Result URLs:',
  limits: 'Rate limits:',
  faults: 'Faults:',
} as const;

/** A comma-separated list of words, trimmed, empty ones dropped. */
function words(list: unknown): string[] {
  return String(list)
    .split(',')
    .map((w) => w.trim())
    .filter(Boolean);
}

export function registerSimulatorCommand(program: Command): void {
  program
    .command('simulator')
    .summary('Run the Model Gateway simulator, for tests and demos without a paid key')
    .description('Run the Model Gateway simulator (for tests, benchmarks and demos without a paid key).')
    .addOption(
      new Option('--port <n>', 'port')
        .env('SIMULATOR_PORT')
        .argParser(port)
        .default(8787)
        .helpGroup(GROUP.server),
    )
    .addOption(new Option('--host <host>', 'address to bind').default('127.0.0.1').helpGroup(GROUP.server))
    // No environment fallback: GATEWAY_API_KEY is often a real key, and this command prints the key it serves.
    .addOption(
      new Option(
        '--api-key <key>',
        'register this key (sk-...) at start (default: a fresh one, printed)',
      ).helpGroup(GROUP.server),
    )
    .addOption(
      new Option('--job-seconds <s>', 'mean job latency')
        .argParser(nonNegative)
        .default(20)
        .helpGroup(GROUP.jobs),
    )
    .addOption(
      new Option('--job-jitter <s>', 'job latency jitter, ± seconds')
        .argParser(nonNegative)
        .default(5)
        .helpGroup(GROUP.jobs),
    )
    .addOption(
      new Option('--rate-limit <rps>', 'requests/second per key over all endpoints (0 = off)')
        .argParser(nonNegative)
        .default(0)
        .helpGroup(GROUP.limits),
    )
    .addOption(
      new Option('--burst <n>', 'token bucket size (default: the rate)')
        .argParser(nonNegative)
        .helpGroup(GROUP.limits),
    )
    .addOption(
      new Option(
        '--publish-rate-limit',
        'send the rate limit in a RateLimit-Policy header on every answer (the spec shows none)',
      )
        .helpGroup(GROUP.limits)
        .hideHelp(),
    )
    .addOption(
      new Option('--max-running <n>', 'unfinished jobs per key (0 = off)')
        .argParser(wholeNumber)
        .default(0)
        .helpGroup(GROUP.limits),
    )
    .addOption(
      new Option('--retry-after-format <fmt>', 'Retry-After as seconds or an HTTP-date')
        .choices(['seconds', 'date'])
        .default('seconds')
        .helpGroup(GROUP.limits)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--url-ttl <s>',
        "a job's video URL answers 403 (as an expired signed URL does) this many seconds after the job completed or the URL was issued (0 = never)",
      )
        .argParser(nonNegative)
        .default(0)
        .helpGroup(GROUP.urls)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--fresh-url-on-check',
        'a status check of a job whose URL expired answers a new URL that works for another --url-ttl (default: the expired one again)',
      )
        .helpGroup(GROUP.urls)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--redirect-results <hops>',
        `result URLs answer 302 down a chain of this many redirects (0-${MAX_REDIRECT_HOPS_HELP}) before the video, as an object store sends to its CDN`,
      )
        .argParser(numberIn({ whole: true, min: 0, max: MAX_REDIRECT_HOPS_HELP }))
        .default(0)
        .helpGroup(GROUP.urls)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--idempotency',
        'honour Idempotency-Key (replay the first job of a repeated key); off by default, as the spec never mentions it',
      )
        .env('SIMULATOR_IDEMPOTENCY')
        .helpGroup(GROUP.jobs),
    )
    .addOption(
      new Option(
        '--job-ttl <s>',
        'a finished job is forgotten (its status answers 404) this many seconds after it finished (0 = never)',
      )
        .argParser(nonNegative)
        .default(0)
        .helpGroup(GROUP.jobs)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--hold-for <s>',
        'answer every /v1 request 429 (Retry-After pointing at the end) for this many seconds after start',
      )
        .argParser(nonNegative)
        .helpGroup(GROUP.limits),
    )
    .addOption(
      new Option('--retry-after-min <s>', 'every 429 carries a Retry-After of at least this many seconds')
        .argParser(nonNegative)
        .default(0)
        .helpGroup(GROUP.limits)
        .hideHelp(),
    )
    .addOption(
      new Option('--seed <n>', 'seed of the fault dice').argParser(number).default(1).helpGroup(GROUP.faults),
    )
    .addOption(
      new Option('--fault-scope <scope>', 'which /v1 requests the request faults hit')
        .choices(['all', 'submit', 'status'])
        .default('all')
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option('--fault-5xx <p>', 'probability of a 503')
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults),
    )
    .addOption(
      new Option(
        '--fault-reset-before <p>',
        'probability that a connection is reset before the request is processed',
      )
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option('--fault-429 <p>', 'probability of a 429 without processing the request')
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults),
    )
    .addOption(
      new Option(
        '--fault-502-after <p>',
        'probability of a 502 after the request was processed (a job may exist)',
      )
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--fault-504-after <p>',
        'probability of a 504 after the request was processed (a job may exist)',
      )
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option('--fault-slow <p>', 'probability of a response slower than --slow-ms')
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option('--slow-ms <ms>', 'delay of a slow response')
        .argParser(nonNegative)
        .default(30_000)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option('--fault-drop <p>', 'probability of a dropped connection')
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option('--fault-malformed <p>', 'probability of a malformed JSON body')
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option('--fault-unknown-status <p>', 'probability of an undocumented status value')
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option('--fault-job-failure <p>', 'probability that a job fails')
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults),
    )
    .addOption(
      new Option(
        '--fault-job-no-url <p>',
        'probability that a job answers "completed" with no video URL, at every status query',
      )
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option('--fault-job-5xx <p>', 'probability that every status query of a job answers HTTP 500')
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option('--moderation-words <words>', 'comma-separated words that fail moderation')
        .default('')
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--gone-words <words>',
        'comma-separated words whose jobs the gateway forgets: every status query answers 404',
      )
        .default('')
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--unknown-status-words <words>',
        'comma-separated words whose jobs answer every status query with the status UNKNOWN (a forgotten task)',
      )
        .default('')
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option('--fault-video-truncated <p>', "probability that a completed job's file is cut short")
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--fault-video-resolution <p>',
        "probability that a completed job's video has another resolution than asked",
      )
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--fault-video-duration <p>',
        "probability that a completed job's video is 5 s longer or shorter than asked",
      )
        .argParser(fraction)
        .default(0)
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option('--truncated-words <words>', 'comma-separated words: those prompts get a truncated file')
        .default('')
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--wrong-resolution-words <words>',
        'comma-separated words: those prompts get a video of another resolution',
      )
        .default('')
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .addOption(
      new Option(
        '--wrong-duration-words <words>',
        'comma-separated words: those prompts get a video of another duration',
      )
        .default('')
        .helpGroup(GROUP.faults)
        .hideHelp(),
    )
    .action(async (o: Record<string, unknown>) => {
      const { startSimulator } = await import('../../simulator/server');
      const sim = await startSimulator({
        port: o.port as number,
        host: o.host as string,
        apiKeys: o.apiKey ? [o.apiKey as string] : undefined,
        jobSeconds: o.jobSeconds as number,
        jobJitterSeconds: o.jobJitter as number,
        rateLimit: o.rateLimit as number,
        burst: o.burst as number | undefined,
        publishRateLimit: Boolean(o.publishRateLimit),
        maxRunningJobs: o.maxRunning as number,
        retryAfterFormat: o.retryAfterFormat as 'seconds' | 'date',
        urlTtlSeconds: o.urlTtl as number,
        freshUrlOnCheck: Boolean(o.freshUrlOnCheck),
        redirectResults: o.redirectResults as number,
        jobTtlSeconds: o.jobTtl as number,
        idempotency: Boolean(o.idempotency),
        ...(o.holdFor !== undefined ? { holdUntil: Date.now() + (o.holdFor as number) * 1000 } : {}),
        seed: o.seed as number,
        faults: {
          scope: o.faultScope as 'all' | 'submit' | 'status',
          retryAfterMinSeconds: o.retryAfterMin as number,
          error5xx: o.fault5xx as number,
          resetBefore: o.faultResetBefore as number,
          error429: o.fault429 as number,
          error502After: o.fault502After as number,
          error504After: o.fault504After as number,
          slow: o.faultSlow as number,
          slowMs: o.slowMs as number,
          drop: o.faultDrop as number,
          malformed: o.faultMalformed as number,
          unknownStatus: o.faultUnknownStatus as number,
          jobFailure: o.faultJobFailure as number,
          jobNoUrl: o.faultJobNoUrl as number,
          jobError5xx: o.faultJob5xx as number,
          moderationWords: words(o.moderationWords),
          goneWords: words(o.goneWords),
          unknownStatusWords: words(o.unknownStatusWords),
          videoTruncated: o.faultVideoTruncated as number,
          videoWrongResolution: o.faultVideoResolution as number,
          videoWrongDuration: o.faultVideoDuration as number,
          truncatedWords: words(o.truncatedWords),
          wrongResolutionWords: words(o.wrongResolutionWords),
          wrongDurationWords: words(o.wrongDurationWords),
        },
      });
      console.log(`Model Gateway simulator listening.`);
      console.log(`export GATEWAY_BASE_URL=${sim.baseUrl}`);
      console.log(`export GATEWAY_API_KEY=${sim.apiKey}`);
      console.log(
        `Admin API (loopback only): ${sim.origin}/admin/{keys, stats, faults, options, hold, outage, jobs/<id>}`,
      );
      console.log(`Idempotency-Key ${o.idempotency ? 'honoured' : 'ignored (every POST makes a new job)'}`);
      await waitForCtrlC();
      await sim.close();
    });
}
