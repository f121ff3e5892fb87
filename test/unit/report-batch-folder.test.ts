// Finding a batch's folder with no Temporal at all (src/report/batch-folder.ts): by id, by the start of one, by
// the CSV it was made from (this environment's own batch among several), and exit 2 with a reason otherwise.
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scopeDigest } from '../../src/client/task-queue';
import { gatewayTarget } from '../../src/config';
import { ConfigError } from '../../src/errors';
import { loadCsv } from '../../src/input/csv';
import { findBatchFolder } from '../../src/report/batch-folder';

async function root() {
  const dir = await mkdtemp(join(tmpdir(), 'vidbatch-report-'));
  const out = join(dir, 'out');
  await writeFile(join(dir, 'p.csv'), 'id,prompt\na,a heron\n');
  const { sha256 } = await loadCsv(join(dir, 'p.csv'));
  const ofCsv = (scope: string) => `batch-${sha256.slice(0, 16)}-${scope}`;
  return { dir, out, ofCsv };
}

describe('findBatchFolder', () => {
  it('takes a batch id, the start of one, or the CSV, from the output root alone', async () => {
    const { dir, out, ofCsv } = await root();
    const id = ofCsv('0123abcd');
    const other = 'batch-ffff000011112222-00000000';
    for (const name of [id, other, '.rows', 'enhanced']) await mkdir(join(out, name), { recursive: true });
    const env = {};
    expect(await findBatchFolder(id, { outRoot: out, env })).toEqual({
      batchId: id,
      folder: join(out, id),
      pageDir: join(out, id),
    });
    expect((await findBatchFolder(id.slice(0, 12), { outRoot: out, env })).batchId).toBe(id);
    expect((await findBatchFolder('ffff00', { outRoot: out, env })).batchId).toBe(other);
    expect((await findBatchFolder(join(dir, 'p.csv'), { outRoot: out, env })).batchId).toBe(id);
  });

  it("takes this environment's batch when a CSV has several, and says so", async () => {
    const { dir, out, ofCsv } = await root();
    const env = { GATEWAY_BASE_URL: 'https://gateway.example/v1' };
    const own = ofCsv(scopeDigest({ target: gatewayTarget(env.GATEWAY_BASE_URL), root: out }, 8));
    const elsewhere = ofCsv('99999999');
    await mkdir(join(out, own), { recursive: true });
    await mkdir(join(out, elsewhere), { recursive: true });
    const said: string[] = [];
    const found = await findBatchFolder(join(dir, 'p.csv'), { outRoot: out, env, log: (m) => said.push(m) });
    expect(found.batchId).toBe(own);
    expect(said.join('\n')).toMatch(/has 2 batch folders .*using batch-/);
  });

  it('refuses (exit 2) what names no folder, or several', async () => {
    const { dir, out, ofCsv } = await root();
    await mkdir(join(out, 'batch-aaaa000000000000-00000000'), { recursive: true });
    await mkdir(join(out, 'batch-aaaa111111111111-00000000'), { recursive: true });
    const env = {};
    const refused = (ref: string) => findBatchFolder(ref, { outRoot: out, env }).catch((e: unknown) => e);
    const ambiguous = await refused('batch-aaaa');
    expect(ambiguous).toBeInstanceOf(ConfigError);
    expect((ambiguous as Error).message).toMatch(/names 2 batches/);
    expect(((await refused(ofCsv('00000000'))) as Error).message).toMatch(/has no folder in/);
    expect(((await refused(join(dir, 'p.csv'))) as Error).message).toMatch(
      /no batch of .*p\.csv has a folder/,
    );
    expect(((await refused('nothing-here')) as Error).message).toMatch(/neither a batch id/);
  });
});
