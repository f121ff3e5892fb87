// GATEWAY_PROVIDER as the spawned `vidbatch` reads a CSV and runs `--simulate`: `validate` checks the rows for
// the provider (its defaults filled in, what it cannot take a problem naming line, column and the values it
// takes), and `run --simulate` speaks the provider's dialect on the simulator, with its defaults, as a target of
// its own (so its try-out and the Model Gateway's never share a batch).
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { FAL_DEFAULT_MODEL } from '../../src/gateway/providers/fal';
import { REPLICATE_DEFAULT_MODEL } from '../../src/gateway/providers/replicate';
import { finalStates, readManifest } from '../../src/results/manifest';
import { exitAndOutput, FAST_POLL_FLAGS, manifestPathOf, vidbatch, type CliRun } from './cli-helpers';

const folder = () => mkdtemp(join(tmpdir(), 'vidbatch-provider-defaults-'));

/** The batch id and target of the "Started batch ..." line. */
function started(r: CliRun): { batchId: string; target: string } | undefined {
  const m = /Started batch (batch-[0-9a-f]{16}-[0-9a-f]{8}) \(\d+ prompts\) for (\S+)/.exec(r.stderr);
  return m ? { batchId: m[1]!, target: m[2]! } : undefined;
}

describe('GATEWAY_PROVIDER=openai-videos npx vidbatch validate', () => {
  it('refuses a duration sora-2 cannot take, naming line, column and the values it takes', async () => {
    const dir = await folder();
    await writeFile(join(dir, 'x.csv'), 'id,prompt,duration\n1,a lake at dawn,8\n2,a boat,5\n3,a dog,\n');
    const env = { GATEWAY_PROVIDER: 'openai-videos' };
    const r = await vidbatch(['validate', 'x.csv'], { cwd: dir, env });
    expect(r.code, exitAndOutput(r)).toBe(2);
    expect(r.stderr).toContain(
      'x.csv:3 [duration] openai-videos: duration 5 is not one sora-2 takes: 4, 8, 12 seconds',
    );
    // Row 3 names no duration: it gets sora-2's default (4 s), which it takes.
    expect(r.stderr).not.toContain('x.csv:4');
    const json = await vidbatch(['validate', 'x.csv', '--json'], { cwd: dir, env });
    expect(JSON.parse(json.stdout)).toMatchObject({
      problems: [{ file: 'x.csv', line: 3, column: 'duration' }],
    });

    // The same file for the Model Gateway (the default) has no problem; a file without durations has none
    // for openai-videos.
    expect((await vidbatch(['validate', 'x.csv'], { cwd: dir })).code).toBe(0);
    await writeFile(join(dir, 'y.csv'), 'prompt\na lake at dawn\n');
    const plain = await vidbatch(['validate', 'y.csv'], { cwd: dir, env });
    expect(plain.code, exitAndOutput(plain)).toBe(0);
  });
});

describe('GATEWAY_PROVIDER=fal npx vidbatch plan --price', () => {
  it('prices the rows at the provider`s model ids, its default filled in, per resolution and duration', async () => {
    const dir = await folder();
    // No model column: each row is fal's default model; row 3 takes fal's default duration and resolution.
    await writeFile(
      join(dir, 'x.csv'),
      'id,prompt,duration,resolution\n1,a lake,5,720P\n2,a boat,10,1080P\n3,a dog,,\n',
    );
    const prices = ['--price', `${FAL_DEFAULT_MODEL}=0.05`, '--price', `${FAL_DEFAULT_MODEL}@1080P=0.1`];
    const fal = await vidbatch(['plan', 'x.csv', ...prices], { cwd: dir, env: { GATEWAY_PROVIDER: 'fal' } });
    expect(fal.code, exitAndOutput(fal)).toBe(0);
    // 5 s x 0.05 + 10 s x 0.1 + 5 s x 0.05
    expect(fal.stderr).toContain('estimated cost: 1.50 for 3 rows (20 s of video, one job per row)');
    expect(JSON.parse(fal.stdout)).toMatchObject({ byModel: { [FAL_DEFAULT_MODEL]: 3 } });
    // The same file for the Model Gateway names another model: fal's prices apply to none of its rows.
    const gateway = await vidbatch(['plan', 'x.csv', ...prices], { cwd: dir });
    expect(gateway.code, exitAndOutput(gateway)).toBe(0);
    expect(JSON.parse(gateway.stdout)).toMatchObject({ estimate: { cost: 0, unpricedRows: 3 } });
  });
});

describe('GATEWAY_PROVIDER=replicate npx vidbatch run --simulate', () => {
  it('runs on the simulator`s Replicate dialect with Replicate`s defaults, a batch apart from the default`s', async () => {
    const dir = await folder();
    const tag = randomUUID().slice(0, 8);
    // No model column: each row gets the provider's default model.
    await writeFile(join(dir, 'x.csv'), `id,prompt\nr1,a lake ${tag}\nr2,a boat ${tag}\nr3,a dog ${tag}\n`);
    const env = { TEMPORAL_ADDRESS: inject('temporalAddress') };
    const run = (extra: Record<string, string>) =>
      vidbatch(['run', 'x.csv', '--simulate', '--sim-job-seconds', '0.5', ...FAST_POLL_FLAGS], {
        cwd: dir,
        env: { ...env, ...extra },
      });
    const stateFile = join(dir, '.vidbatch', 'simulator-state.json');

    const r = await run({ GATEWAY_PROVIDER: 'replicate' });
    expect(r.code, exitAndOutput(r)).toBe(0);
    expect(r.stderr).toMatch(/Gateway simulator at http:\/\/\S+\/replicate\/v1 \(replicate\)/);
    const batch = started(r);
    expect(batch, exitAndOutput(r)).toMatchObject({ target: `replicate+simulate:${stateFile}` });
    const rows = finalStates(await readManifest(manifestPathOf(r)));
    expect(rows).toHaveLength(3);
    for (const row of rows) {
      expect(row.status, row.rowId).toBe('succeeded');
      expect(row.model, row.rowId).toBe(REPLICATE_DEFAULT_MODEL);
      expect(row.parameters, row.rowId).toEqual({ resolution: '720P', duration: 5 });
      expect(existsSync(row.file!), row.rowId).toBe(true);
    }
    // The simulator made them through Replicate's predictions, for the model the manifest names.
    const jobs = () =>
      readFile(stateFile, 'utf8').then(
        (text) => (JSON.parse(text) as { jobs: { prompt: string; model: string }[] }).jobs,
      );
    expect((await jobs()).map((j) => j.model)).toEqual(Array(3).fill(REPLICATE_DEFAULT_MODEL));

    // The Model Gateway's try-out of the same file: another target, another batch, its own default model.
    const plain = await run({});
    expect(plain.code, exitAndOutput(plain)).toBe(0);
    const plainBatch = started(plain);
    expect(plainBatch, exitAndOutput(plain)).toMatchObject({ target: `simulate:${stateFile}` });
    expect(plainBatch!.batchId).not.toBe(batch!.batchId);
    const plainRows = finalStates(await readManifest(manifestPathOf(plain)));
    expect(plainRows.map((row) => [row.status, row.model])).toEqual(
      Array(3).fill(['succeeded', 'modelfamily-1.0-r2v']),
    );
    expect((await jobs()).length).toBe(6);
  });
});
