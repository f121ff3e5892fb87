// Faults of a job's video rather than of its answers: a completed job whose file is truncated, of another
// resolution, or of another duration than the submit asked for. Decided once, when the job is made, by the
// dice (`videoTruncated`, `videoWrongResolution`, `videoWrongDuration`) or by words in the prompt
// (`truncatedWords`, ...), so every download of the job gets the same bytes.
import { clip, CLIP_SIZES, DEFAULT_CLIP, stamped } from './test-clips';
import type { FaultKind, FaultOptions } from './fault-settings';

export type VideoFault = 'truncated' | 'wrong_resolution' | 'wrong_duration';

const DICE: [VideoFault, FaultKind, keyof FaultOptions][] = [
  ['truncated', 'videoTruncated', 'truncatedWords'],
  ['wrong_resolution', 'videoWrongResolution', 'wrongResolutionWords'],
  ['wrong_duration', 'videoWrongDuration', 'wrongDurationWords'],
];

/** The job's video fault, if its prompt names a fault word or the dice give it one. */
export function chooseVideoFault(
  prompt: string,
  faults: FaultOptions,
  roll: (fault: FaultKind) => boolean,
): { videoFault?: VideoFault } {
  const text = prompt.toLowerCase();
  for (const [fault, , words] of DICE) {
    if ((faults[words] as string[]).some((w) => text.includes(w.toLowerCase()))) return { videoFault: fault };
  }
  for (const [fault, dice] of DICE) if (roll(dice)) return { videoFault: fault };
  return {};
}

/** Another resolution than asked: 720P gets 480P, any other gets 720P. */
function otherResolution(resolution: string): string {
  return resolution === '720P' ? '480P' : '720P';
}

/** Another duration than asked, 5 s away: 1-5 s get 6-10 s, 6-10 s get 1-5 s. */
function otherDuration(duration: number): number {
  return duration > 5 ? duration - 5 : duration + 5;
}

/**
 * The bytes of a completed job's video: the clip of the asked resolution and duration (jobs.ts `Job`), or a
 * wrong one, or the first 60% of the right one (its moov is first, so what is cut is media data), stamped
 * with the job id.
 */
export function videoBytes(job: {
  id: string;
  resolution?: string;
  duration?: number;
  videoFault?: VideoFault;
}): Buffer {
  const resolution = job.resolution && CLIP_SIZES[job.resolution] ? job.resolution : DEFAULT_CLIP.resolution;
  const duration = job.duration ?? DEFAULT_CLIP.duration;
  if (job.videoFault === 'wrong_resolution')
    return stamped(clip(otherResolution(resolution), duration), job.id);
  if (job.videoFault === 'wrong_duration') return stamped(clip(resolution, otherDuration(duration)), job.id);
  const bytes = stamped(clip(resolution, duration), job.id);
  return job.videoFault === 'truncated' ? bytes.subarray(0, Math.floor(bytes.length * 0.6)) : bytes;
}
