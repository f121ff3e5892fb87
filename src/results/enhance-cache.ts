// The kept rewrites of an output root: `<out-root>/enhanced/<key>.json`, one file per (chat model,
// instructions, original prompt). A rewrite is paid once: a re-run, a retry, a resumed batch, `plan
// --enhance` and another file with the same prompt all read it here before asking the gateway. Written
// atomically (a temp file, then rename), so a reader never sees half a rewrite.
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ChatUsage, EnhanceOptions } from '../contract/enhance';

export const ENHANCED_DIR = 'enhanced';

export interface KeptRewrite {
  model: string;
  instructionsSha256: string;
  original: string;
  enhanced: string;
  usage?: ChatUsage;
  /** ISO time the gateway answered. */
  at: string;
  requestId?: string;
}

export const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

/** The key of a rewrite: sha256 over the chat model, the instructions and the original prompt. */
export function rewriteKey(options: EnhanceOptions, original: string): string {
  return sha256Hex(JSON.stringify([options.model, options.instructions, original]));
}

export function rewritePath(outRoot: string, options: EnhanceOptions, original: string): string {
  return join(outRoot, ENHANCED_DIR, `${rewriteKey(options, original)}.json`);
}

/** The kept rewrite of `original`, if this root has one for these settings (an unreadable file: none). */
export async function readRewrite(
  outRoot: string,
  options: EnhanceOptions,
  original: string,
): Promise<KeptRewrite | undefined> {
  try {
    const kept = JSON.parse(await readFile(rewritePath(outRoot, options, original), 'utf8')) as KeptRewrite;
    // A hash collision or a hand-edited file must not send another prompt's rewrite.
    const same =
      kept.model === options.model &&
      kept.original === original &&
      kept.instructionsSha256 === sha256Hex(options.instructions);
    return same && typeof kept.enhanced === 'string' && kept.enhanced.trim() ? kept : undefined;
  } catch {
    return undefined;
  }
}

/** Keeps a rewrite (temp file + rename: a crash leaves the old file or none, never a torn one). */
export async function writeRewrite(
  outRoot: string,
  options: EnhanceOptions,
  rewrite: Omit<KeptRewrite, 'model' | 'instructionsSha256'>,
): Promise<string> {
  const path = rewritePath(outRoot, options, rewrite.original);
  await mkdir(join(outRoot, ENHANCED_DIR), { recursive: true });
  const kept: KeptRewrite = {
    model: options.model,
    instructionsSha256: sha256Hex(options.instructions),
    ...rewrite,
  };
  const temp = `${path}.${randomUUID()}.tmp`;
  try {
    await writeFile(temp, `${JSON.stringify(kept, null, 2)}\n`);
    await rename(temp, path);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  return path;
}
