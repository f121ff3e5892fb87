// The videos the simulator serves: real, playable test-pattern clips (made by scripts/make-clips.ts, committed
// under ./clips), one per resolution and whole duration 1-10 s, chosen by what the job asked for. Each job's
// bytes end with a `free` box carrying its id (still a valid MP4), so every video has its own sha256.
import { readFileSync } from 'node:fs';

/** Frame size of each resolution the simulator accepts (`RESOLUTIONS` in video-job-routes.ts). */
export const CLIP_SIZES: Record<string, { width: number; height: number }> = {
  '480P': { width: 854, height: 480 },
  '720P': { width: 1280, height: 720 },
  '1080P': { width: 1920, height: 1080 },
};
export const CLIP_DURATIONS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
/** What a job that names no resolution or duration gets (the CLI's defaults too). */
export const DEFAULT_CLIP = { resolution: '720P', duration: 5 };

export function clipName(resolution: string, seconds: number): string {
  return `${resolution}-${seconds}s.mp4`;
}

const cache = new Map<string, Buffer>();

/**
 * The clip for a resolution and duration: an unknown resolution gets 720P, a duration the nearest whole second
 * in 1-10 (the gateway accepts only whole seconds 1-10, so in practice the match is exact).
 */
export function clip(resolution = DEFAULT_CLIP.resolution, duration = DEFAULT_CLIP.duration): Buffer {
  const res = CLIP_SIZES[resolution] ? resolution : DEFAULT_CLIP.resolution;
  const seconds = Math.min(10, Math.max(1, Math.round(duration)));
  const name = clipName(res, seconds);
  let bytes = cache.get(name);
  if (!bytes) {
    bytes = readFileSync(new URL(`./clips/${name}`, import.meta.url));
    cache.set(name, bytes);
  }
  return bytes;
}

/** `bytes` followed by a `free` box holding `tag`: the same video, with bytes of its own. */
export function stamped(bytes: Buffer, tag: string): Buffer {
  const body = Buffer.from(tag);
  const header = Buffer.alloc(8);
  header.writeUInt32BE(8 + body.length, 0);
  header.write('free', 4, 'latin1');
  return Buffer.concat([bytes, header, body]);
}
