// A downloaded video checked against what its row asked for: the container is parsed with mp4box (pure JS,
// no native binary) for duration, frame size, video codec and audio; the top-level boxes are walked to catch
// a truncated file (a box that runs past the end). Rules (README "Verification of downloaded videos"):
// - duration: within max(0.5 s, 10% of the asked duration) of `parameters.duration`;
// - resolution: `<n>P` (720P, 1080p, ...) asks for a frame whose shorter side is n (the height of a landscape
//   frame), within max(16 px, 3%) (encoders size frames in blocks of 16); any other resolution string is not
//   judged; a duration the file does not state (some fragmented MP4s) is not judged either;
// - audio and codec are reported, not judged (the request does not ask for them).
import { open, stat } from 'node:fs/promises';
import { createFile, Log, MP4BoxBuffer, type Movie } from 'mp4box';
import type { Verification } from '../contract/jobs';

export type { Verification } from '../contract/jobs';

/** What a row asked for, as far as a video can be checked against it (`parameters.duration`, `.resolution`). */
export interface VideoAsked {
  duration?: number;
  resolution?: string;
}

/** How far a video's duration may be from the asked one, in seconds. */
export function durationTolerance(asked: number): number {
  return Math.max(0.5, asked * 0.1);
}

/** The asked frame height of a resolution string (`720P` -> 720), or undefined when it is not of that form. */
export function askedHeight(resolution: string | undefined): number | undefined {
  const m = /^\s*(\d{3,4})\s*[pP]\s*$/.exec(resolution ?? '');
  return m ? Number(m[1]) : undefined;
}

/** What a row's `parameters` ask of its video (non-numeric durations and non-string resolutions are ignored). */
export function askedOf(parameters: Record<string, unknown> | undefined): VideoAsked {
  const duration = Number(parameters?.duration);
  const resolution = parameters?.resolution;
  return {
    ...(parameters?.duration !== undefined && Number.isFinite(duration) && duration > 0 ? { duration } : {}),
    ...(typeof resolution === 'string' ? { resolution } : {}),
  };
}

const HEADER = 16;
const CHUNK = 1 << 20;

/**
 * Walks the top-level boxes: each must be at least 8 bytes and end inside the file; `ftyp` comes first and a
 * `moov` box is there. Returns why the file is not a valid MP4, or undefined.
 */
async function containerProblem(file: string, size: number): Promise<string | undefined> {
  const handle = await open(file, 'r');
  try {
    const head = Buffer.alloc(HEADER);
    const types: string[] = [];
    for (let at = 0; at < size;) {
      const { bytesRead } = await handle.read(head, 0, HEADER, at);
      if (bytesRead < 8) return `truncated: ${size - at} stray byte(s) at offset ${at}`;
      let boxSize = head.readUInt32BE(0);
      const type = head.toString('latin1', 4, 8);
      if (boxSize === 1) {
        if (bytesRead < 16) return `truncated: the ${type} box header at offset ${at} is cut`;
        boxSize = Number(head.readBigUInt64BE(8));
      } else if (boxSize === 0) boxSize = size - at; // runs to the end of the file
      if (!/^[\x20-\x7e]{4}$/.test(type) || boxSize < 8) return `no valid box at offset ${at}`;
      if (at === 0 && type !== 'ftyp') return `first box is "${type}", not ftyp`;
      if (at + boxSize > size)
        return `truncated: the ${type} box at offset ${at} needs ${boxSize} bytes, the file ends after ${size - at}`;
      types.push(type);
      at += boxSize;
    }
    if (!types.includes('moov')) return 'no moov box (the movie header is missing)';
    return undefined;
  } finally {
    await handle.close();
  }
}

/** Parses the movie header with mp4box, feeding the file until it is ready (the moov may be at the end). */
async function parseMovie(file: string, size: number): Promise<Movie> {
  Log.setLogLevel(() => {}); // mp4box logs to the console otherwise; its errors reach onError
  const mp4 = createFile();
  let movie: Movie | undefined;
  let error: string | undefined;
  mp4.onReady = (info) => void (movie = info);
  mp4.onError = (module, message) => void (error = `${module}: ${message}`);
  const handle = await open(file, 'r');
  try {
    for (let at = 0; at < size && !movie && !error; at += CHUNK) {
      const length = Math.min(CHUNK, size - at);
      const bytes = new Uint8Array(length);
      await handle.read(bytes, 0, length, at);
      mp4.appendBuffer(MP4BoxBuffer.fromArrayBuffer(bytes.buffer, at), at + length >= size);
    }
    mp4.flush();
  } finally {
    await handle.close();
  }
  if (error) throw new Error(error);
  if (!movie) throw new Error('mp4box found no complete movie header');
  return movie;
}

/**
 * The video's own length: its video track's duration when the track says, else the movie's (a longer audio
 * track must not hide a short video), else a fragmented file's `mehd`.
 */
function movieSeconds(movie: Movie): number | undefined {
  const video = movie.videoTracks[0];
  if (video && video.duration > 0 && video.timescale > 0) return video.duration / video.timescale;
  if (movie.duration > 0 && movie.timescale > 0) return movie.duration / movie.timescale;
  const f = movie.fragment_duration;
  if (f && f.num > 0 && f.den > 0) return f.num / f.den;
  const tracks = movie.tracks.filter((t) => t.duration > 0 && t.timescale > 0);
  return tracks.length ? Math.max(...tracks.map((t) => t.duration / t.timescale)) : undefined;
}

/** Parses `file` and compares it with what was asked. Never throws: an unreadable file is a problem too. */
export async function verifyVideo(file: string, asked: VideoAsked): Promise<Verification> {
  const size = await stat(file).then(
    (s) => s.size,
    (err: Error) => err,
  );
  if (size instanceof Error) return { ok: false, problems: [`cannot read the file: ${size.message}`] };
  let movie: Movie;
  try {
    const invalid = await containerProblem(file, size);
    if (invalid) return { ok: false, problems: [`not a valid MP4: ${invalid}`] };
    movie = await parseMovie(file, size);
  } catch (err) {
    return { ok: false, problems: [`not a valid MP4: ${(err as Error).message}`] };
  }
  const problems: string[] = [];
  const video = movie.videoTracks[0];
  const width = video ? (video.video?.width ?? video.track_width) : undefined;
  const height = video ? (video.video?.height ?? video.track_height) : undefined;
  const seconds = movieSeconds(movie);
  const found: Omit<Verification, 'ok' | 'problems'> = {
    ...(seconds !== undefined ? { durationSeconds: Math.round(seconds * 1000) / 1000 } : {}),
    ...(width ? { width } : {}),
    ...(height ? { height } : {}),
    ...(video?.codec ? { codec: video.codec } : {}),
    audio: movie.audioTracks.length > 0,
  };
  if (!video) problems.push('no video track');
  if (asked.duration !== undefined) {
    const tolerance = durationTolerance(asked.duration);
    // A fragmented MP4 may state no duration at all: not judged (no durationSeconds on the row), never a
    // mismatch that strict mode would fail and a retry would pay for again.
    if (seconds !== undefined && Math.abs(seconds - asked.duration) > tolerance)
      problems.push(`duration ${seconds.toFixed(1)} s, asked ${asked.duration} s (tolerance ${tolerance} s)`);
  }
  const wanted = askedHeight(asked.resolution);
  if (wanted !== undefined && width && height) {
    const shorter = Math.min(width, height);
    // Encoders size frames in blocks of 16 (720P may come as 1280x704, 1080P as 1088 lines): a difference
    // within one block, or 3%, is the same resolution.
    if (Math.abs(shorter - wanted) > Math.max(16, Math.round(wanted * 0.03)))
      problems.push(
        width >= height
          ? `height ${height}, asked ${asked.resolution}`
          : `${width}x${height} (portrait: width ${width}), asked ${asked.resolution}`,
      );
  }
  return { ok: problems.length === 0, ...found, problems };
}
