import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  estimateCost,
  estimateRows,
  loadPricesFile,
  parsePriceFlag,
  parsePrices,
  PriceError,
  type Prices,
} from '../../src/results/prices';

async function file(name: string, text: string): Promise<string> {
  const path = join(await mkdtemp(join(tmpdir(), 'vidbatch-prices-')), name);
  await writeFile(path, text);
  return path;
}

describe('--price', () => {
  it('reads <model>=<per second> and <model>@<resolution>=<per second>', () => {
    expect(parsePriceFlag('modelfamily-1.0-r2v=0.05')).toEqual({
      model: 'modelfamily-1.0-r2v',
      resolution: '*',
      perSecond: 0.05,
    });
    expect(parsePriceFlag('m@1080p=1.5')).toEqual({ model: 'm', resolution: '1080P', perSecond: 1.5 });
    expect(parsePriceFlag('*=0')).toEqual({ model: '*', resolution: '*', perSecond: 0 });
    // Other providers' model ids: fal's paths, Replicate's owner/name and pinned versions.
    expect(parsePriceFlag('fal-ai/wan-25-preview/text-to-video@1080p=0.1')).toEqual({
      model: 'fal-ai/wan-25-preview/text-to-video',
      resolution: '1080P',
      perSecond: 0.1,
    });
    expect(parsePriceFlag('bytedance/seedance-1-lite:5b618302=0.04')).toMatchObject({
      model: 'bytedance/seedance-1-lite:5b618302',
    });
  });

  it.each([
    ['modelfamily', /must be <model>=<amount per second>/],
    ['m=', /must be <model>=<amount per second>/],
    ['m=abc', /amount must be a number >= 0/],
    ['m=-1', /amount must be a number >= 0/],
    ['m=Infinity', /amount must be a number >= 0/],
    ['m@hd=1', /resolution must look like 720P/],
    ['m!x=1', /model must be a model id/],
    ['fal-ai//wan=1', /model must be a model id/],
    ['/wan=1', /model must be a model id/],
  ])('refuses %s', (value, reason) => {
    expect(() => parsePriceFlag(value)).toThrow(PriceError);
    expect(() => parsePriceFlag(value)).toThrow(reason);
  });
});

describe('prices files', () => {
  it('reads CSV (per second or per video, blank resolution = any, a currency) and JSON', async () => {
    const csv = await file(
      'p.csv',
      'model,resolution,per_second,per_video,currency\nm1,,0.1,,EUR\nm1,1080P,,2,EUR\n*,*,0.01,,EUR\n',
    );
    expect(await loadPricesFile(csv)).toEqual({
      entries: [
        { model: 'm1', resolution: '*', perSecond: 0.1 },
        { model: 'm1', resolution: '1080P', perVideo: 2 },
        { model: '*', resolution: '*', perSecond: 0.01 },
      ],
      currency: 'EUR',
    });
    const json = await file('p.json', JSON.stringify([{ model: 'm1', resolution: '720p', perVideo: 1 }]));
    expect(await loadPricesFile(json)).toEqual({
      entries: [{ model: 'm1', resolution: '720P', perVideo: 1 }],
    });
    const wrapped = await file(
      'w.json',
      JSON.stringify({ currency: 'USD', prices: [{ model: 'm', perSecond: 1 }] }),
    );
    expect((await loadPricesFile(wrapped)).currency).toBe('USD');
  });

  it.each([
    [
      'a.csv',
      'model,per_second\nm1,0.1\nm2,cheap\n',
      /prices file .*a\.csv, line 3, column per_second: must be a number >= 0/,
    ],
    [
      'b.csv',
      'model,per_second,per_video\nm1,0.1,2\n',
      /line 2, column per_second: give exactly one of per_second and per_video/,
    ],
    ['c.csv', 'model,price\nm1,0.1\n', /line 1, column price: unknown column/],
    ['d.csv', 'model,per_second\n,0.1\n', /line 2, column model: is required/],
    ['e.csv', 'model,per_second\n', /no prices/],
    [
      'f.json',
      '{"prices": [{"model": "m", "perSecond": -2}]}',
      /f\.json, field prices\.0\.perSecond: must be a number >= 0/,
    ],
    ['g.json', '[{"model": "m", "perSecond": 1, "perMinute": 3}]', /g\.json, field .*: .*perMinute/],
    ['h.json', '{"prices": [', /h\.json: not valid JSON/],
    ['i.csv', 'model,per_second,currency\nm1,1,USD\nm2,1,EUR\n', /one currency only/],
  ])('refuses %s naming the file, line and field', async (name, text, reason) => {
    const path = await file(name, text);
    await expect(loadPricesFile(path)).rejects.toThrow(reason);
    await expect(loadPricesFile(path)).rejects.toBeInstanceOf(PriceError);
  });

  it('a missing file is named', async () => {
    await expect(loadPricesFile('/nonexistent/prices.csv')).rejects.toThrow(
      /prices file \/nonexistent\/prices\.csv: cannot read it/,
    );
  });

  it('flags replace the file entry of the same model and resolution', async () => {
    const csv = await file('p.csv', 'model,per_second\nm1,0.1\nm2,0.2\n');
    const prices = await parsePrices({ prices: csv, price: [parsePriceFlag('m1=0.5')] });
    expect(prices?.entries).toEqual([
      { model: 'm1', resolution: '*', perSecond: 0.5 },
      { model: 'm2', resolution: '*', perSecond: 0.2 },
    ]);
    expect(await parsePrices({})).toBeUndefined();
  });
});

describe('estimateCost', () => {
  const prices: Prices = {
    entries: [
      { model: 'm1', resolution: '*', perSecond: 0.1 },
      { model: 'm1', resolution: '1080P', perVideo: 3 },
      { model: '*', resolution: '480P', perSecond: 0.01 },
    ],
  };

  it('per second x duration (default 5 s), per video, the most specific price first', () => {
    expect(
      estimateCost({ model: 'm1', parameters: { resolution: '720P', duration: 8 } }, prices),
    ).toBeCloseTo(0.8);
    expect(estimateCost({ model: 'm1', parameters: { resolution: '720P' } }, prices)).toBeCloseTo(0.5);
    expect(estimateCost({ model: 'm1', parameters: { resolution: '1080P', duration: 8 } }, prices)).toBe(3);
    expect(
      estimateCost({ model: 'm2', parameters: { resolution: '480P', duration: 10 } }, prices),
    ).toBeCloseTo(0.1);
    expect(estimateCost({ model: 'm2', parameters: { resolution: '720P' } }, prices)).toBeUndefined();
    expect(estimateCost({ model: 'm1', parameters: {} }, undefined)).toBeUndefined();
    // An OpenAI-Videos row may give its length as its own `seconds` (a string, as that API takes it).
    expect(
      estimateCost({ model: 'm1', parameters: { resolution: '720P', seconds: '8' } }, prices),
    ).toBeCloseTo(0.8);
  });

  it('estimates a plan: rows x duration x price, rows without a price counted apart', () => {
    const rows = [
      { model: 'm1', parameters: { resolution: '720P', duration: 5 } },
      { model: 'm1', parameters: { resolution: '720P', duration: 10 } },
      { model: 'm2', parameters: { resolution: '720P', duration: 5 } },
    ];
    expect(estimateRows(rows, prices)).toMatchObject({ seconds: 20, unpricedRows: 1 });
    expect(estimateRows(rows, prices).cost).toBeCloseTo(1.5);
  });
});
