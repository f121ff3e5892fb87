// The gallery reads the input CSV as `run` read it: for the provider GATEWAY_PROVIDER names, whose defaults fill
// the rows (a card of a row not yet run names the model it will be sent with) and whose values are no problem.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_MODEL } from '../../src/contract/rows';
import { FAL_DEFAULT_MODEL, fal } from '../../src/gateway/providers/fal';
import { CsvPart } from '../../src/review/load';

describe('the review gallery`s CSV', () => {
  it('is read for the provider: its default model on rows that name none', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vidbatch-review-csv-'));
    const file = join(dir, 'x.csv');
    await writeFile(file, 'id,prompt,duration\nr1,a lake,10\nr2,a boat,\n');
    const forFal = await new CsvPart().read(file, fal);
    expect(forFal.rows.map((r) => r.model)).toEqual([FAL_DEFAULT_MODEL, FAL_DEFAULT_MODEL]);
    const forDefault = await new CsvPart().read(file);
    expect(forDefault.rows.map((r) => r.model)).toEqual([DEFAULT_MODEL, DEFAULT_MODEL]);
  });
});
