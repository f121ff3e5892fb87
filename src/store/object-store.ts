// Where a batch's input and rows live, as objects: a folder on the worker's disk (the default, the same files
// as before) or an S3-compatible bucket shared by workers on several machines. Objects are written whole and
// never appended to; a key written from its content (the CSV's sha256) holds the same bytes whoever writes it.

/** What `head` tells of an object. */
export interface StoredObject {
  size: number;
  /** Changes whenever the object is written again. */
  etag: string;
}

export interface PutOptions {
  /** Write only if no object has the key; `put` then returns false when one does. */
  ifAbsent?: boolean;
  contentType?: string;
  /** A secret: a folder's file is readable by its owner only (mode 0600); a bucket's object is as its policy says. */
  secret?: boolean;
}

export interface UploadOptions {
  contentType?: string;
  /** User metadata kept with the object on S3 (`x-amz-meta-*`), e.g. a video's sha256; a folder keeps none. */
  metadata?: Record<string, string>;
}

export interface ObjectStore {
  /** The store's own URL (`s3://bucket/prefix`, or the folder's path), named in messages. */
  readonly url: string;
  /** The URL of a key, as workflow input may carry it (never a credential). */
  urlOf(key: string): string;
  /** The key a URL names in this store; undefined when it names something elsewhere. */
  keyOf(url: string): string | undefined;
  head(key: string): Promise<StoredObject | undefined>;
  /** Up to `length` bytes from `start` (fewer at the end, none past it); undefined when there is no object. */
  read(key: string, start: number, length: number): Promise<Buffer | undefined>;
  /** The object (or bytes `start` to `end`, inclusive) as a stream of chunks; undefined when there is no object. */
  stream(key: string, range?: { start: number; end: number }): Promise<AsyncIterable<Uint8Array> | undefined>;
  /** A URL that lets whoever holds it GET the object for `seconds`; a folder store has none. */
  presign?(key: string, seconds: number): Promise<string>;
  /** Writes the object whole (readers see the old or the new, never part); true when it was written. */
  put(key: string, body: Buffer | string, options?: PutOptions): Promise<boolean>;
  /** Writes the object whole from chunks, however large (a multipart upload on S3). */
  upload(
    key: string,
    body: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>,
    options?: UploadOptions,
  ): Promise<void>;
  /** Keys starting with `prefix`, in key order; with `startAfter`, only the keys after it. */
  list(prefix: string, startAfter?: string): AsyncIterable<{ key: string; size: number }>;
  /** The names of the folders directly under `prefix` (`''`, or ending in `/`) that hold an object, in order. */
  folders(prefix: string): AsyncIterable<string>;
  /** Writes `to` with the bytes (and metadata) of `from`, inside the store; false when there is no `from`. */
  copy(from: string, to: string): Promise<boolean>;
  delete(key: string): Promise<void>;
}

/**
 * Throws unless `key` is a relative, slash-separated name with no empty, `.` or `..` part: a key made from
 * workflow input can neither leave a local store's folder nor alias another key.
 */
export function checkKey(key: string): string {
  const parts = key.split('/');
  if (!key || key.includes('\0') || key.includes('\\') || parts.some((p) => !p || p === '.' || p === '..'))
    throw new Error(`not a valid object key: ${JSON.stringify(key)}`);
  return key;
}
