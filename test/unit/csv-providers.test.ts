// The CSV read for a provider: model ids as providers name them, each provider's defaults filled in (so the
// request, its key and the manifest say what is sent), what the provider cannot take a problem of the row
// naming its column and the values it takes, and the Model Gateway's rows and keys exactly as they were.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { simulatorTarget, targetProvider } from '../../src/config';
import { CsvValidationError } from '../../src/errors';
import type { ProviderAdapter } from '../../src/gateway/provider';
import { fal, FAL_DEFAULT_MODEL } from '../../src/gateway/providers/fal';
import { modelGateway } from '../../src/gateway/providers/model-gateway';
import { openAiVideos } from '../../src/gateway/providers/openai-videos';
import { replicate, REPLICATE_DEFAULT_MODEL } from '../../src/gateway/providers/replicate';
import { loadValidCsv, MAX_MODEL_LENGTH, parseCsv, rowDefaults } from '../../src/input/csv';
import { rowsFileKey } from '../../src/input/rows-file';

const csvOf = (...lines: string[]) => lines.join('\n') + '\n';

describe('the model column', () => {
  it('takes the ids providers name models by, and keys their requests with hex only', () => {
    const models = [
      'modelfamily-1.0-r2v',
      'fal-ai/kling-video/v2/master/text-to-video',
      'bytedance/seedance-1-lite',
      'owner/name:5f0b3c9a1d2e4f6a8b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a',
      'openai/sora-2',
      'org/model@v2',
    ];
    const { rows, problems } = parseCsv(
      csvOf('prompt,model', ...models.map((m, i) => `fox ${i},${m}`)),
      'm.csv',
    );
    expect(problems).toEqual([]);
    expect(rows.map((r) => r.model)).toEqual(models);
    // The key is a hash of the request: a model's slashes and colons never reach a file or key name.
    for (const row of rows) expect(row.request).toMatch(/^[0-9a-f]{24}\/1$/);
  });

  it('refuses anything else with the file, line, column and reason', () => {
    const long = `a/${'b'.repeat(MAX_MODEL_LENGTH)}`;
    const { problems, rows } = parseCsv(
      csvOf(
        'prompt,model',
        'one,"fal-ai/kling video"',
        'two,../../etc/passwd',
        'three,/fal-ai/x',
        'four,fal-ai//x',
        'five,owner/name?x=1',
        `six,${long}`,
        'seven,owner/name/',
        'eight,modelfamily-1.0-r2v',
      ),
      'm.csv',
    );
    expect(rows.map((r) => r.prompt)).toEqual(['eight']);
    expect(problems.map((p) => [p.file, p.line, p.column])).toEqual(
      [2, 3, 4, 5, 6, 7, 8].map((line) => ['m.csv', line, 'model']),
    );
    expect(problems.map((p) => p.reason)).toEqual([
      'must not contain spaces',
      'must not contain ".."',
      'must not start or end with "/" or contain "//"',
      'must not start or end with "/" or contain "//"',
      expect.stringMatching(/^must not contain "\?": a model id is letters, digits and \. _ - \/ : @/),
      `must be at most ${MAX_MODEL_LENGTH} characters`,
      'must not start or end with "/" or contain "//"',
    ]);
  });
});

describe('the defaults of a row that names none', () => {
  it('are the Model Gateway`s, its rows and request keys exactly as before providers', () => {
    const text = csvOf('prompt', 'a fox');
    const plain = parseCsv(text, 'x.csv');
    const read = parseCsv(text, 'x.csv', { provider: modelGateway });
    expect(plain.rows).toEqual(read.rows);
    expect(plain.rows[0]).toMatchObject({
      model: 'modelfamily-1.0-r2v',
      parameters: { resolution: '720P', duration: 5 },
      // Pinned: what this row was keyed by before there were providers.
      request: 'e0bf99aa043839a58e6b5d3c/1',
    });
    expect(plain.provider).toBeUndefined();
    expect(read.provider).toBe('model-gateway');
    // Its rows file keeps its name too.
    expect(rowsFileKey(plain.sha256, undefined, modelGateway)).toBe(rowsFileKey(plain.sha256));
    expect(rowsFileKey(plain.sha256)).toBe(`.rows/${plain.sha256.slice(0, 32)}-plain.jsonl`);
  });

  it.each([
    { provider: openAiVideos, model: 'sora-2', duration: 4 },
    { provider: fal, model: FAL_DEFAULT_MODEL, duration: 5 },
    { provider: replicate, model: REPLICATE_DEFAULT_MODEL, duration: 5 },
  ])(
    'are $provider.name`s own, in the row, its request key and its rows file',
    ({ provider, model, duration }) => {
      const text = csvOf('prompt,resolution', 'a fox,', 'a cat,720p');
      const { rows, problems } = parseCsv(text, 'x.csv', { provider });
      expect(problems).toEqual([]);
      expect(rowDefaults(provider)).toEqual({ model, resolution: '720P', duration });
      for (const row of rows)
        expect(row).toMatchObject({ model, parameters: { resolution: '720P', duration } });
      const plain = parseCsv(text, 'x.csv');
      expect(rows[0]!.request).not.toBe(plain.rows[0]!.request);
      expect(rowsFileKey(plain.sha256, undefined, provider)).not.toBe(rowsFileKey(plain.sha256));
    },
  );

  it('give each provider a rows file of its own', () => {
    const sha = 'a'.repeat(64);
    const keys = [undefined, openAiVideos, fal, replicate].map((p) => rowsFileKey(sha, undefined, p));
    expect(new Set(keys).size).toBe(4);
  });
});

describe('what the provider cannot take', () => {
  it('is a problem of the row naming its line, column and the values the provider takes', async () => {
    const text = csvOf('id,prompt,duration', 'a,a fox,5', 'b,a cat,8', 'c,a dog,');
    const { problems, rows } = parseCsv(text, 'sora.csv', { provider: openAiVideos });
    expect(problems).toEqual([
      {
        file: 'sora.csv',
        line: 2,
        column: 'duration',
        reason: 'openai-videos: duration 5 is not one sora-2 takes: 4, 8, 12 seconds',
      },
    ]);
    // Kept: a worker reading the file finds its rows where the batch counted them.
    expect(rows.map((r) => r.parameters.duration)).toEqual([5, 8, 4]);

    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-csv-'));
    await writeFile(join(dir, 'sora.csv'), text);
    const error = await loadValidCsv(join(dir, 'sora.csv'), { provider: openAiVideos }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CsvValidationError);
    expect((error as Error).message).toContain('sora.csv:2 [duration] openai-videos: duration 5');
    await expect(loadValidCsv(join(dir, 'sora.csv'))).resolves.toMatchObject({ problems: [] });
  });

  it('names the column the value came from: the model, the resolution, a parameters.* column', () => {
    const models = parseCsv(csvOf('prompt,model', 'a fox,modelfamily-1.0-r2v'), 'r.csv', {
      provider: replicate,
    }).problems;
    expect(models.map((p) => [p.line, p.column])).toEqual([[2, 'model']]);
    expect(models[0]!.reason).toMatch(
      /^replicate: model modelfamily-1\.0-r2v is not a Replicate model \(owner\/name/,
    );
    const resolutions = parseCsv(csvOf('prompt,resolution', 'a fox,4320P'), 'f.csv', {
      provider: fal,
    }).problems;
    expect(resolutions).toEqual([
      expect.objectContaining({
        line: 2,
        column: 'resolution',
        reason: `fal: resolution 4320P is not one ${FAL_DEFAULT_MODEL} takes: 480P, 720P, 1080P`,
      }),
    ]);
    const sizes = parseCsv(csvOf('prompt,parameters.size', 'a fox,1792x1024'), 's.csv', {
      provider: openAiVideos,
    }).problems;
    expect(sizes.map((p) => [p.line, p.column])).toEqual([[2, 'parameters.size']]);
    expect(sizes[0]!.reason).toContain('size 1792x1024 is not one sora-2 takes: 720x1280, 1280x720');
  });

  it('says when the value is the provider`s default, the row giving none', () => {
    const picky: Pick<ProviderAdapter, 'name' | 'defaultModel' | 'defaults' | 'validate'> = {
      name: 'picky',
      defaultModel: 'picky-1',
      defaults: { duration: 3 },
      validate: ({ parameters }) =>
        parameters?.duration === 6 ? undefined : `duration ${String(parameters?.duration)} is not 6`,
    };
    const { problems } = parseCsv(csvOf('prompt,duration', 'a fox,', 'a cat,6'), 'p.csv', {
      provider: picky,
    });
    expect(problems).toEqual([
      {
        file: 'p.csv',
        line: 2,
        column: 'duration',
        reason: "picky: duration 3 is not 6 (the row gives none: picky's default)",
      },
    ]);
  });
});

describe('the --simulate target', () => {
  it('has the provider in front for any but the default, as other targets do', () => {
    const plain = simulatorTarget('.vidbatch/simulator-state.json');
    expect(plain).toMatch(/^simulate:\//);
    expect(simulatorTarget('.vidbatch/simulator-state.json', 'model-gateway')).toBe(plain);
    expect(simulatorTarget('.vidbatch/simulator-state.json', 'fal')).toBe(`fal+${plain}`);
    expect(targetProvider(`fal+${plain}`)).toBe('fal');
    expect(targetProvider(plain)).toBeUndefined();
    expect(targetProvider('openai-videos+http://litellm.local:4000')).toBe('openai-videos');
    expect(targetProvider('https://gateway.example.com/v1#team-a')).toBeUndefined();
  });
});
