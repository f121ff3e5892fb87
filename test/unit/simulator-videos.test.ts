// The simulator's videos (src/simulator/test-clips.ts, video-faults.ts) over real HTTP: the clip of the asked
// resolution and duration, bytes of its own per job, and the video faults by share of jobs.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { verifyVideo } from '../../src/results/verify-video';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/server';

const sims: Simulator[] = [];
afterEach(async () => {
  while (sims.length) await sims.pop()?.close();
});
const dir = await mkdtemp(join(tmpdir(), 'vidbatch-sim-videos-'));

async function sim(options: SimulatorOptions = {}): Promise<Simulator> {
  const s = await startSimulator({ jobSeconds: 0.05, jobJitterSeconds: 0, ...options });
  sims.push(s);
  return s;
}

/** Submits a job asking for `parameters`, waits for it, downloads its video; the file and its verification. */
async function videoOf(s: Simulator, parameters: { resolution?: string; duration?: number }) {
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${s.apiKey}` };
  const submit = await fetch(`${s.baseUrl}/videos/generations`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ model: 'modelfamily-1.0-r2v', input: { prompt: 'a red fox' }, parameters }),
  });
  const { id } = (await submit.json()) as { id: string };
  for (;;) {
    const job = (await (await fetch(`${s.baseUrl}/videos/generations/${id}`, { headers })).json()) as {
      status: string;
      data?: { url: string }[];
    };
    if (job.status === 'completed') {
      const bytes = Buffer.from(await (await fetch(job.data![0]!.url)).arrayBuffer());
      const file = join(dir, `${id}.mp4`);
      await writeFile(file, bytes);
      return { id, bytes, verification: await verifyVideo(file, parameters) };
    }
    await new Promise((r) => setTimeout(r, 30));
  }
}

describe('simulator: videos', () => {
  it('serves the clip of the asked resolution and duration, with bytes of its own per job', async () => {
    const s = await sim();
    const a = await videoOf(s, { resolution: '1080P', duration: 7 });
    expect(a.verification).toMatchObject({ ok: true, width: 1920, height: 1080, audio: true });
    expect(a.verification.durationSeconds).toBeCloseTo(7, 0);
    const b = await videoOf(s, { resolution: '1080P', duration: 7 });
    expect(b.bytes.equals(a.bytes)).toBe(false);
    expect(b.bytes.includes(Buffer.from(b.id))).toBe(true);
    // No parameters: the defaults (720P, 5 s).
    expect((await videoOf(s, {})).verification).toMatchObject({ ok: true, height: 720, durationSeconds: 5 });
  });

  it('serves wrong durations, wrong resolutions and cut files to the share of jobs its faults say', async () => {
    const s = await sim({ faults: { videoWrongDuration: 1 } });
    expect((await videoOf(s, { resolution: '480P', duration: 3 })).verification.problems).toEqual([
      'duration 8.0 s, asked 3 s (tolerance 0.5 s)',
    ]);
    s.state.setFaults({ videoWrongDuration: 0, videoWrongResolution: 1 });
    expect((await videoOf(s, { resolution: '720P', duration: 5 })).verification.problems).toEqual([
      'height 480, asked 720P',
    ]);
    s.state.setFaults({ videoWrongResolution: 0, videoTruncated: 1 });
    const cut = await videoOf(s, { resolution: '720P', duration: 5 });
    expect(cut.verification.problems[0]).toMatch(/^not a valid MP4: truncated/);
    expect(s.stats().jobsWithVideoFaults).toMatchObject({
      wrong_duration: [expect.any(String)],
      wrong_resolution: [expect.any(String)],
      truncated: [cut.id],
    });
    s.state.setFaults({ videoTruncated: 0 });
    expect((await videoOf(s, { resolution: '720P', duration: 5 })).verification.ok).toBe(true);
  });
});
