// What a video API's dialect must say for vidbatch to run batches on it: an adapter is a plain object that
// turns vidbatch's calls into HTTP calls and the provider's answers back into jobs. It never sends anything
// itself: the transport (client.ts) makes every call, once, with the key check, the Retry-After holds, the
// timeouts and the redaction of the key, and turns every failure into an error of errors.ts that says
// whether a job may exist. So an adapter decides only what the provider's words mean, and cannot weaken
// spend safety. Types only: adapters and the transport both import this file.
import type { ChatMessage } from './chat';
import type { CallKind } from './retry-after-hold';
import type { CanonicalStatus } from './status';

/** One row's request as the CSV gives it: the model, `input.*` (prompt included) and `parameters.*`. */
export interface GenerationRequest {
  model: string;
  input: Record<string, unknown>;
  parameters?: Record<string, unknown>;
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

/** One HTTP call an adapter asks the transport to make. */
export interface HttpCall {
  method: HttpMethod;
  /**
   * A path relative to the base URL (`/videos`), or an absolute URL on the base URL's origin (a provider's
   * own status URL). The transport refuses any other origin: the key goes nowhere else.
   */
  path: string;
  /** Sent as JSON. */
  body?: unknown;
  /** Extra headers (an idempotency key, where the provider takes one). Authorization is the transport's. */
  headers?: Record<string, string>;
  /** The Retry-After hold the call waits on and sets; default `submit` for a POST, `status` otherwise. */
  kind?: CallKind;
}

/** What a provider's answer could not give, in words for a message: the transport raises it as malformed. */
export interface Problem {
  problem: string;
}

/** A job as vidbatch sees it, read from a submit or status answer. */
export interface ProviderJob {
  /** Opaque, owned by the adapter (a path such as `<app>/requests/<id>` is fine); never holds the key. */
  id: string;
  status: CanonicalStatus;
  /** The status as the provider sent it (goes into messages). */
  rawStatus: string;
  /**
   * Where the video is, once completed: an absolute URL, or a path relative to the base URL (a video served
   * by the provider's API itself, fetched with the key when `videoNeedsKey`).
   */
  url?: string;
  error?: { code?: string; message?: string };
  /**
   * The answer is not the whole result: one more call gets it (a queue whose result sits at another URL).
   * The transport makes it in the same check and returns what `read` makes of its answer.
   */
  follow?: { call: HttpCall; read: (json: unknown) => ProviderJob | Problem };
}

/** Functions as properties, not methods: an adapter is a plain object, and its functions use no `this`. */
export interface ProviderAdapter {
  /** What GATEWAY_PROVIDER names it, e.g. `model-gateway`, `openai-videos`. */
  readonly name: string;
  /** The model of a row whose CSV names none. */
  readonly defaultModel: string;
  /**
   * The resolution (in the CSV's spelling, `720P`) and duration (seconds) of a row whose CSV gives none, as the
   * default model takes them; absent: the CSV's own defaults, 720P and 5 s. The CSV reader fills them in, so a
   * row's request, its request key and the manifest say what is sent.
   */
  readonly defaults?: { resolution?: string; duration?: number };
  /** An example base URL, shown when GATEWAY_BASE_URL is missing or wrong. */
  readonly exampleBaseUrl: string;
  /** What is wrong with a base URL (trailing slashes already dropped), or undefined when it will do. */
  checkBaseUrl: (baseUrl: string) => string | undefined;
  /** The headers that carry the key (`{ authorization: 'Bearer <key>' }` for most). */
  authorization: (key: string) => Record<string, string>;

  /** The call that makes a job. `idempotencyKey` is the same on every retry of a row; send it if taken. */
  submit: (request: GenerationRequest, idempotencyKey: string) => HttpCall;
  /** The call that reads a job's state. */
  check: (jobId: string) => HttpCall;
  /** A submit's or check's 2xx answer as a job; a Problem when it is not of the documented shape. */
  readJob: (json: unknown) => ProviderJob | Problem;
  /** The code and message of an error answer's body, when it has them (anything else: the text is used). */
  readError: (json: unknown) => { code?: string; message?: string } | undefined;

  /** Whether the video URL needs the key (sent only to the base URL's origin, never on a redirect away). */
  readonly videoNeedsKey: boolean;
  /**
   * What the provider cannot take in a request (a size or duration outside its set), naming the values it
   * accepts; checked when the CSV is read (a validation error of the row) and again before each submit, so
   * nothing is paid for a request it would refuse. Start the text with the field it is about (`duration 5 is
   * not one sora-2 takes: 4, 8, 12 seconds`): the CSV check names that column.
   */
  validate?: (request: GenerationRequest) => string | undefined;
  /** The call that stops a job (and its billing), where the provider has one. */
  cancel?: (jobId: string) => HttpCall;
  /**
   * Whether a cancel of a job in this status (its raw status, as a check just read it) surely stops it; false
   * where the provider only asks the job to stop and it may still finish and bill (fal, a running request).
   * Absent: a cancel stops.
   */
  cancelStops?: (rawStatus: string) => boolean;
  /** Listing the models: the call and what its answer says (doctor's cheap check of the key). */
  models?: { call: HttpCall; read: (json: unknown) => string[] | Problem };
  /**
   * For a provider that lists no models: one cheap authenticated call that makes no job (an account lookup),
   * doctor's check of the key. Any 2xx answer means the key works; its body is not read. On the base URL's
   * origin like every call, so the key goes nowhere else.
   */
  keyCheck?: HttpCall;
  /**
   * The wait a 429's body asks for, in ms, for a provider that words it there rather than in Retry-After.
   * The transport asks only when the answer has no Retry-After header; undefined: the documented default.
   */
  readRetryAfter?: (json: unknown) => number | undefined;
  /** A chat completion call; its answer is read in the OpenAI shape (chat.ts). */
  chat?: (model: string, messages: ChatMessage[]) => HttpCall;
}
