// vidbatch as a library (`import { ... } from 'vidbatch'`): the functions the CLI is made of, re-exported as
// they are. A typical program opens a session, starts (or attaches to) the batch of a CSV and follows it:
//
//   const session = await openSession({ simulate: true });
//   try {
//     const { result } = await startAndFollow(() => startBatch(session, 'prompts.csv'), {
//       onProgress: (p) => console.log(`${p.succeeded + p.failed}/${p.total}`),
//     });
//   } finally {
//     await session.close();
//   }
//
// This file only re-exports: the modules it names are the ones to read (and to change).

// Connecting: Temporal (TEMPORAL_ADDRESS, or a dev server on this machine), the simulator, an in-process worker.
export { openSession, SIMULATED_JOB_SECONDS } from './client/session';
export type { ServerKind, Session, SessionOptions } from './client/session';

// Starting a batch from a CSV, following it, retrying its failed rows.
export { batchHandle, followBatch, getProgress, resolveBatchId, startBatch } from './client/batches';
export type { StartBatchOptions, StartedBatch } from './client/batches';
export { retryFailed } from './client/retry-failed';
export type { EarlierRetry, RetryFailedOptions, RetryStarted } from './client/retry-failed';
export { startAndFollow } from './starter';
export type { FollowOptions } from './starter';

// Loading and validating CSV files.
export { loadCsv, loadValidCsv, parseCsv } from './input/csv';
export type { CsvOptions, LoadCsvOptions, ParsedCsv } from './input/csv';

// Running a worker: `runWorker` is `vidbatch worker`; `createWorker` one to run yourself.
export { createWorker, runWorker } from './worker';
export type { CreateWorkerOptions } from './worker';

// The gateway simulator (`vidbatch simulator`).
export { startSimulator } from './simulator/server';
export type { Simulator, SimulatorOptions } from './simulator/server';

// What a batch reports.
export type { BatchOptions } from './contract/batch-options';
export type { BatchResult } from './contract/batch';
export type { BatchProgress } from './contract/progress';
export type { PromptResult } from './contract/prompt';
export type { PromptRow } from './contract/rows';

// Video APIs: the provider (adapter) interface, the adapters GATEWAY_PROVIDER names, and the one transport that
// makes every call (docs/other-video-apis.md). A custom adapter goes into createWorker's `gateway.provider`.
export type {
  GenerationRequest,
  HttpCall,
  HttpMethod,
  Problem,
  ProviderAdapter,
  ProviderJob,
} from './gateway/provider';
export type { CanonicalStatus } from './gateway/status';
export { canonicalStatus } from './gateway/status';
export { DEFAULT_PROVIDER, PROVIDERS, providerNamed } from './gateway/providers';
export { modelGateway } from './gateway/providers/model-gateway';
export { openAiVideos } from './gateway/providers/openai-videos';
export { GatewayClient } from './gateway/client';
export type { CallOptions, JobState, VideoAuth } from './gateway/client';
export { gatewayTarget, loadGatewaySettings } from './config';
export type { GatewaySettings } from './config';

// Errors: every gateway error says whether a job may exist (`outcomeUnknown`); docs/other-video-apis.md has
// the table of what each means.
export {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  ConnectionError,
  GatewayError,
  KeyRefusedError,
  MalformedResponseError,
  NotFoundError,
  NotSentError,
  PermissionDeniedError,
  RateLimitError,
  ServerError,
  TimeoutError,
  WorkerStoppingError,
} from './gateway/errors';
export { ConfigError, CsvValidationError, DownloadError, PathNotAllowedError, VidbatchError } from './errors';
