// The object store as an S3 bucket (AWS S3 or an S3-compatible service: R2, B2, MinIO, versitygw, ...), with
// the AWS SDK's own settings: its credential chain, AWS_REGION, and AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL)
// for a service other than AWS, which is then addressed path-style (`endpoint/bucket/key`), as such services
// expect. Credentials stay in the process that holds them: workflow input carries `s3://` URLs only.
import {
  CopyObjectCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { Readable } from 'node:stream';
import { parseS3Url } from '../config';
import {
  checkKey,
  type ObjectStore,
  type PutOptions,
  type StoredObject,
  type UploadOptions,
} from './object-store';

// vidbatch pins the SDK's version: its notice about later versions needing Node 22 is not the user's to act on.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const statusOf = (err: unknown) =>
  err instanceof S3ServiceException ? err.$metadata.httpStatusCode : undefined;

export class S3Store implements ObjectStore {
  readonly url: string;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly client: S3Client;

  constructor(url: string, env: NodeJS.ProcessEnv = process.env) {
    ({ bucket: this.bucket, prefix: this.prefix } = parseS3Url(url));
    this.url = `s3://${this.bucket}/${this.prefix}`.replace(/\/$/, '');
    const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL;
    this.client = new S3Client({
      // The SDK finds no region when none is configured, which S3-compatible services seldom need.
      ...(env.AWS_REGION || env.AWS_DEFAULT_REGION ? {} : { region: 'us-east-1' }),
      ...(endpoint ? { endpoint, forcePathStyle: true } : {}),
      followRegionRedirects: true,
    });
  }

  urlOf(key: string): string {
    return `s3://${this.bucket}/${this.prefix}${checkKey(key)}`;
  }

  keyOf(url: string): string | undefined {
    const mine = `s3://${this.bucket}/${this.prefix}`;
    if (!url.startsWith(mine)) return undefined;
    try {
      return checkKey(url.slice(mine.length));
    } catch {
      return undefined;
    }
  }

  private objectKey(key: string) {
    return this.prefix + checkKey(key);
  }

  async head(key: string): Promise<StoredObject | undefined> {
    try {
      const out = await this.client.send(
        new HeadObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }),
      );
      return { size: out.ContentLength ?? 0, etag: out.ETag ?? '' };
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  async read(key: string, start: number, length: number): Promise<Buffer | undefined> {
    if (length <= 0) return (await this.head(key)) ? Buffer.alloc(0) : undefined;
    try {
      const out = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: this.objectKey(key),
          Range: `bytes=${start}-${start + length - 1}`,
        }),
      );
      return Buffer.from(await out.Body!.transformToByteArray());
    } catch (err) {
      const status = statusOf(err);
      if (status === 404) return undefined;
      // Range Not Satisfiable: the start is at or past the end.
      if (status === 416) return Buffer.alloc(0);
      throw err;
    }
  }

  async stream(
    key: string,
    range?: { start: number; end: number },
  ): Promise<AsyncIterable<Uint8Array> | undefined> {
    try {
      const out = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: this.objectKey(key),
          ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}),
        }),
      );
      return out.Body as Readable;
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  async presign(key: string, seconds: number): Promise<string> {
    // Loaded only here: only a gallery of videos in the store needs it.
    const { getSignedUrl } = await import('@aws-sdk/s3-request-presigner');
    return getSignedUrl(
      this.client,
      new GetObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }),
      {
        expiresIn: seconds,
      },
    );
  }

  async put(key: string, body: Buffer | string, options: PutOptions = {}): Promise<boolean> {
    try {
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: this.objectKey(key),
          Body: body,
          ...(options.contentType ? { ContentType: options.contentType } : {}),
          // A conditional write (S3 since 2024, and most compatibles): 412 when the key exists.
          ...(options.ifAbsent ? { IfNoneMatch: '*' } : {}),
        }),
      );
      return true;
    } catch (err) {
      if (options.ifAbsent && statusOf(err) === 412) return false;
      throw err;
    }
  }

  async upload(
    key: string,
    body: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>,
    options: UploadOptions = {},
  ): Promise<void> {
    await new Upload({
      client: this.client,
      params: {
        Bucket: this.bucket,
        Key: this.objectKey(key),
        Body: Readable.from(body),
        ...(options.contentType ? { ContentType: options.contentType } : {}),
        ...(options.metadata ? { Metadata: options.metadata } : {}),
      },
    }).done();
  }

  async *list(prefix: string, startAfter?: string): AsyncIterable<{ key: string; size: number }> {
    let token: string | undefined;
    do {
      const out = await this.client.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: this.prefix + prefix,
          ...(token
            ? { ContinuationToken: token }
            : startAfter
              ? { StartAfter: this.prefix + startAfter }
              : {}),
        }),
      );
      for (const o of out.Contents ?? [])
        if (o.Key) yield { key: o.Key.slice(this.prefix.length), size: o.Size ?? 0 };
      token = out.IsTruncated ? out.NextContinuationToken : undefined;
    } while (token);
  }

  async *folders(prefix: string): AsyncIterable<string> {
    let token: string | undefined;
    const under = this.prefix + (prefix ? checkKey(prefix.replace(/\/$/, '')) + '/' : '');
    do {
      // The delimiter lists each folder once however many objects it holds.
      const out = await this.client.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: under,
          Delimiter: '/',
          ...(token ? { ContinuationToken: token } : {}),
        }),
      );
      for (const p of out.CommonPrefixes ?? [])
        if (p.Prefix) yield p.Prefix.slice(under.length).replace(/\/$/, '');
      token = out.IsTruncated ? out.NextContinuationToken : undefined;
    } while (token);
  }

  async copy(from: string, to: string): Promise<boolean> {
    try {
      // Server-side (no bytes through this process), metadata included; one request up to S3's 5 GB.
      await this.client.send(
        new CopyObjectCommand({
          Bucket: this.bucket,
          Key: this.objectKey(to),
          CopySource: `${this.bucket}/${this.objectKey(from).split('/').map(encodeURIComponent).join('/')}`,
        }),
      );
      return true;
    } catch (err) {
      if (statusOf(err) === 404 || (err as { name?: string }).name === 'NoSuchKey') return false;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }));
  }

  /** Lets go of the client's connections. */
  destroy(): void {
    this.client.destroy();
  }
}
