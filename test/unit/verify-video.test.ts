import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { askedHeight, askedOf, durationTolerance, verifyVideo } from '../../src/results/verify-video';
import { clip, CLIP_DURATIONS, CLIP_SIZES, stamped } from '../../src/simulator/test-clips';
import { videoBytes } from '../../src/simulator/video-faults';
import { tinyMp4 } from '../../src/simulator/mp4';

const dir = await mkdtemp(join(tmpdir(), 'vidbatch-verify-'));
let n = 0;
async function fileOf(bytes: Buffer): Promise<string> {
  const file = join(dir, `v${n++}.mp4`);
  await writeFile(file, bytes);
  return file;
}

describe('verifyVideo', () => {
  it('finds every committed clip as made: its size, duration, H.264 video and audio', async () => {
    for (const [resolution, { width, height }] of Object.entries(CLIP_SIZES)) {
      for (const duration of CLIP_DURATIONS) {
        const got = await verifyVideo(await fileOf(clip(resolution, duration)), { resolution, duration });
        expect(got, `${resolution} ${duration}s`).toMatchObject({
          ok: true,
          width,
          height,
          audio: true,
          problems: [],
        });
        expect(got.codec).toMatch(/^avc1\./);
        expect(Math.abs(got.durationSeconds! - duration)).toBeLessThan(0.2);
      }
    }
  });

  it('accepts a clip with a job id stamped at its end (what the simulator serves)', async () => {
    const got = await verifyVideo(
      await fileOf(videoBytes({ id: 'vid_1', resolution: '1080P', duration: 10 })),
      {
        resolution: '1080P',
        duration: 10,
      },
    );
    expect(got).toMatchObject({ ok: true, height: 1080, problems: [] });
  });

  it('names a duration outside the tolerance and a height other than asked', async () => {
    const short = await verifyVideo(await fileOf(clip('720P', 3)), { resolution: '720P', duration: 5 });
    expect(short).toMatchObject({ ok: false, problems: ['duration 3.0 s, asked 5 s (tolerance 0.5 s)'] });
    const low = await verifyVideo(await fileOf(clip('480P', 5)), { resolution: '720P', duration: 5 });
    expect(low).toMatchObject({ ok: false, height: 480, width: 854, problems: ['height 480, asked 720P'] });
    const both = await verifyVideo(
      await fileOf(videoBytes({ id: 'x', resolution: '1080P', duration: 10, videoFault: 'wrong_duration' })),
      { resolution: '720P', duration: 10 },
    );
    expect(both.problems).toEqual(['duration 5.0 s, asked 10 s (tolerance 1 s)', 'height 1080, asked 720P']);
  });

  it('tolerates max(0.5 s, 10%) and does not judge resolutions it cannot read', async () => {
    expect(durationTolerance(2)).toBe(0.5);
    expect(durationTolerance(10)).toBe(1);
    expect((await verifyVideo(await fileOf(clip('720P', 9)), { duration: 10 })).ok).toBe(true);
    expect((await verifyVideo(await fileOf(clip('720P', 8)), { duration: 10 })).ok).toBe(false);
    expect(askedHeight('1080p')).toBe(1080);
    expect(askedHeight('4K')).toBeUndefined();
    expect(askedHeight('1280x720')).toBeUndefined();
    const got = await verifyVideo(await fileOf(clip('480P', 5)), { resolution: '4K' });
    expect(got).toMatchObject({ ok: true, problems: [] });
    expect(askedOf({ resolution: '720P', duration: '5' })).toEqual({ resolution: '720P', duration: 5 });
    expect(askedOf({ duration: 'long' })).toEqual({});
  });

  it('says a truncated or broken file is not a valid MP4', async () => {
    const cut = await verifyVideo(
      await fileOf(videoBytes({ id: 'vid_2', resolution: '720P', duration: 5, videoFault: 'truncated' })),
      { resolution: '720P', duration: 5 },
    );
    expect(cut.ok).toBe(false);
    expect(cut.problems).toEqual([
      expect.stringMatching(/^not a valid MP4: truncated: the mdat box at offset \d+ needs \d+ bytes/),
    ]);
    const headless = await verifyVideo(await fileOf(clip('720P', 5).subarray(0, 500)), { duration: 5 });
    expect(headless.problems[0]).toMatch(/^not a valid MP4: truncated/);
    const junk = await verifyVideo(await fileOf(Buffer.from('this is not a video at all')), {});
    expect(junk.problems[0]).toMatch(/^not a valid MP4: /);
    const noMoov = await verifyVideo(await fileOf(stamped(clip('720P', 5).subarray(0, 32), 'x')), {});
    expect(noMoov.problems[0]).toMatch(/^not a valid MP4: /);
    const missing = await verifyVideo(join(dir, 'nope.mp4'), {});
    expect(missing).toMatchObject({
      ok: false,
      problems: [expect.stringMatching(/^cannot read the file: /)],
    });
  });

  it('finds no video track in a container without one', async () => {
    const got = await verifyVideo(await fileOf(tinyMp4('vid_3', 5)), { duration: 5 });
    expect(got.ok).toBe(false);
    expect(got.problems).toContain('no video track');
  });
});

describe('verifyVideo tolerances', () => {
  it('takes a frame within one 16-pixel block of the asked height as that resolution, not one further off', async () => {
    const file = await fileOf(clip('720P', 5));
    // The clip is 1280x720: asked 736P (an encoder's 1280x736 for 720P seen the other way) passes, 768P does not.
    expect((await verifyVideo(file, { resolution: '736P', duration: 5 })).ok).toBe(true);
    const off = await verifyVideo(file, { resolution: '768P', duration: 5 });
    expect(off.ok).toBe(false);
    expect(off.problems).toEqual(['height 720, asked 768P']);
  });
});
