// A real S3-compatible server for the tests: versitygw (Apache-2.0), built from the Go module proxy by
// `bash scripts/s3.sh build` (.ci/run does it) into the same cache as the Temporal binaries. Each call starts
// its own server on a free port, over a fresh folder, with one bucket; `restart` stops and starts it on the
// same port and folder (objects kept), as an outage would.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { defaultCacheDir } from '../src/dev-server/cli-binary';
import { executable, required } from './requirements';

// The SDK's notice about later versions needing Node 22 (vidbatch pins its version; src/store/s3-store.ts).
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export const VERSITYGW_VERSION = 'v1.8.0'; // scripts/s3.sh VERSION

/** The versitygw binary: VERSITYGW_PATH, else the cache entry scripts/s3.sh builds. */
export function findVersitygw(): string | undefined {
  const path =
    process.env.VERSITYGW_PATH || join(defaultCacheDir(), 'versitygw', VERSITYGW_VERSION, 'versitygw');
  return executable(path) ? path : undefined;
}

/** versitygw for tests that need an object store: its path, or undefined after `required` said how to get it. */
export function requireVersitygw(): string | undefined {
  const path = findVersitygw();
  const met = required(path !== undefined, {
    tag: 's3',
    missing: `no versitygw at ${process.env.VERSITYGW_PATH || join(defaultCacheDir(), 'versitygw', VERSITYGW_VERSION)}`,
    remedy: 'Build it once with `bash scripts/s3.sh build` (needs Go) to run these tests',
    inCi: '.ci/run builds it with `bash scripts/s3.sh build`; see its output',
  });
  return met ? path : undefined;
}

export interface S3Server {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  bucket: string;
  /** The AWS SDK settings a vidbatch process needs to reach the bucket. */
  env: Record<string, string>;
  client(): S3Client;
  /** Stops the server, keeps it down `downMs`, and starts it again on the same port and folder. */
  restart(downMs?: number): Promise<void>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export async function startS3Server(binary: string, bucket = 'vidbatch-test'): Promise<S3Server> {
  const dir = await mkdtemp(join(tmpdir(), 'vidbatch-s3-'));
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  const access = 'vidbatch-test-access';
  const secret = 'vidbatch-test-secret';
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(
      binary,
      ['--access', access, '--secret', secret, '--port', `127.0.0.1:${port}`, 'posix', dir],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
    for (const started = Date.now(); ;) {
      if (child.exitCode !== null) throw new Error(`versitygw exited with ${child.exitCode}: ${stderr}`);
      const up = await fetch(endpoint).then(
        () => true,
        () => false,
      );
      if (up) return;
      if (Date.now() - started > 20_000)
        throw new Error(`versitygw did not answer on ${endpoint}: ${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const stop = async () => {
    const c = child;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGTERM');
    await exited;
  };
  await start();
  const env = {
    AWS_ACCESS_KEY_ID: access,
    AWS_SECRET_ACCESS_KEY: secret,
    AWS_REGION: 'us-east-1',
    AWS_ENDPOINT_URL_S3: endpoint,
  };
  const server = {
    endpoint,
    bucket,
    env,
    /** An S3 client of the server's, for a test to look in the bucket itself (destroy it after). */
    client: () =>
      new S3Client({
        region: env.AWS_REGION,
        endpoint,
        forcePathStyle: true,
        credentials: { accessKeyId: access, secretAccessKey: secret },
      }),
    restart: async (downMs = 0) => {
      await stop();
      await new Promise((r) => setTimeout(r, downMs));
      await start();
    },
    stop,
  };
  const client = server.client();
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  client.destroy();
  return server;
}
