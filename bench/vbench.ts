// Input CSVs from the VBench prompt lists (shared/data/vbench, Apache-2.0), written with a real CSV writer
// because the prompts contain commas and quotes. Used by examples, tests and benchmarks.
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'csv-stringify/sync';

export const VBENCH_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../shared/data/vbench');
export type VbenchList = 'all_dimension' | 'all_dimension_cn' | 'all_dimension_longer';

export async function vbenchPrompts(
  list: VbenchList = 'all_dimension',
  dir = process.env.VBENCH_DIR ?? VBENCH_DIR,
): Promise<string[]> {
  const text = await readFile(join(dir, `${list}.txt`), 'utf8');
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
}

/** Writes a CSV of `count` prompts (cycling through the list, with unique ids) and returns its rows. */
export async function writeVbenchCsv(
  path: string,
  count: number,
  list: VbenchList = 'all_dimension',
  offset = 0,
): Promise<string[][]> {
  const prompts = await vbenchPrompts(list);
  const rows = Array.from({ length: count }, (_, i) => [
    `vb-${offset + i + 1}`,
    prompts[(offset + i) % prompts.length]!,
  ]);
  await writeFile(path, stringify([['id', 'prompt'], ...rows]));
  return rows;
}
