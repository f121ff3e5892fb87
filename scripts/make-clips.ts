// Makes the simulator's test-pattern clips (src/simulator/clips/<resolution>-<seconds>s.mp4) with ffmpeg:
// every resolution the simulator accepts, every whole duration from 1 to 10 s, so a job is always served a
// clip that matches what it asked for (faults aside). Run once, commit the output; CI needs no ffmpeg.
//   npx tsx scripts/make-clips.ts        (needs ffmpeg on PATH: apt-get install -y ffmpeg)
// Kept small on purpose (~300 KB for all 30): SMPTE bars with one moving square at 1 frame/s, one key frame,
// CRF 40, and a mono 8 kHz AAC track that ticks once a second (silence costs almost nothing). `+faststart`
// puts the moov box first, as providers serving video for the web usually do.
import { execFileSync } from 'node:child_process';
import { mkdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CLIP_DURATIONS, CLIP_SIZES, clipName } from '../src/simulator/test-clips';

const dir = fileURLToPath(new URL('../src/simulator/clips/', import.meta.url));
mkdirSync(dir, { recursive: true });
let total = 0;
for (const [resolution, { width, height }] of Object.entries(CLIP_SIZES)) {
  for (const seconds of CLIP_DURATIONS) {
    const out = `${dir}${clipName(resolution, seconds)}`;
    execFileSync('ffmpeg', [
      ...['-loglevel', 'error', '-y'],
      ...['-f', 'lavfi', '-i', `smptehdbars=size=${width}x${height}:rate=1:duration=${seconds}`],
      ...['-f', 'lavfi', '-i', `color=c=white:size=64x64:rate=1:duration=${seconds}`],
      ...['-f', 'lavfi', '-i', `sine=frequency=880:sample_rate=8000:duration=${seconds}`],
      '-filter_complex',
      "[0][1]overlay=x='mod(t*200,W-64)':y=H/2-32,format=yuv420p[v];[2]volume=volume=0:enable='gte(mod(t,1),0.15)'[a]",
      ...['-map', '[v]', '-map', '[a]'],
      ...['-c:v', 'libx264', '-preset', 'veryslow', '-crf', '40', '-g', '600'],
      ...['-c:a', 'aac', '-b:a', '8k', '-ac', '1'],
      ...['-movflags', '+faststart', '-map_metadata', '-1', '-fflags', '+bitexact'],
      out,
    ]);
    total += statSync(out).size;
    console.log(`${out}: ${statSync(out).size} bytes`);
  }
}
console.log(`${total} bytes in all`);
