// The result videos: the URL a completed job answers with, which stops working `urlTtlSeconds` after the job
// finished (410), and GET /files/<job id>.mp4, which serves the job's bytes (video-faults.ts decides them).
import type { ServerResponse } from 'node:http';
import { HttpError } from './http';
import type { Job } from './jobs';
import type { SimulatorState } from './state';
import { videoBytes } from './video-faults';

/** The job's video URL on this simulator, with its expiry time when URLs expire. */
export function resultUrl(state: SimulatorState, origin: string, job: Job): string {
  const ttl = state.options.urlTtlSeconds;
  const expires = ttl > 0 ? job.doneAt + ttl * 1000 : 0;
  return `${origin}/files/${job.id}.mp4${expires ? `?expires=${expires}` : ''}`;
}

/** Serves one result video; returns the status sent. */
export function serveFile(
  state: SimulatorState,
  res: ServerResponse,
  path: string,
  query: URLSearchParams,
): number {
  const job = state.jobs.get(decodeURIComponent(path.slice('/files/'.length).replace(/\.mp4$/, '')));
  const expires = Number(query.get('expires') ?? 0);
  if (!job || state.jobStatus(job) !== 'completed') throw new HttpError(404, 'not_found', 'No such file.');
  if (expires && state.now() > expires) throw new HttpError(410, 'expired', 'This link has expired.');
  const bytes = videoBytes(job);
  res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': bytes.length });
  res.end(bytes);
  return 200;
}
