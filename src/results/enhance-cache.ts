// The kept rewrites of an output root: `<out-root>/enhanced/<key>.json`, one file per (chat model,
// instructions, original prompt), or the same objects under VIDBATCH_STORE, shared by every worker. A rewrite
// is paid once: a re-run, a retry, a resumed batch, `plan --enhance` and another file with the same prompt all
// read it here before asking the gateway. Written whole (a folder's temp file, then rename), so a reader never
// sees half a rewrite.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { ChatUsage, EnhanceOptions } from '../contract/enhance';
import { LocalStore } from '../store/local-store';
import type { ObjectStore } from '../store/object-store';
import { objectAt } from '../store/open-store';
import { isStoreUrl, joinStorePath } from '../store/store-url';

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

/** Where a root keeps its rewrites: a folder, or a prefix in the store. */
export const rewritesDir = (outRoot: string) =>
  isStoreUrl(outRoot) ? joinStorePath(outRoot, ENHANCED_DIR) : join(outRoot, ENHANCED_DIR);

export function rewritePath(outRoot: string, options: EnhanceOptions, original: string): string {
  const name = `${rewriteKey(options, original)}.json`;
  return isStoreUrl(outRoot) ? joinStorePath(rewritesDir(outRoot), name) : join(rewritesDir(outRoot), name);
}

/** The store and key of a rewrite: a folder's file, or an object in the store. */
async function placeOf(
  outRoot: string,
  options: EnhanceOptions,
  original: string,
): Promise<{ store: ObjectStore; key: string }> {
  if (isStoreUrl(outRoot)) return objectAt(rewritePath(outRoot, options, original));
  return { store: new LocalStore(outRoot), key: `${ENHANCED_DIR}/${rewriteKey(options, original)}.json` };
}

/** The kept rewrite of `original`, if this root has one for these settings (an unreadable one: none). */
export async function readRewrite(
  outRoot: string,
  options: EnhanceOptions,
  original: string,
): Promise<KeptRewrite | undefined> {
  try {
    const { store, key } = await placeOf(outRoot, options, original);
    const chunks = await store.stream(key);
    if (!chunks) return undefined;
    const parts: Buffer[] = [];
    for await (const c of chunks) parts.push(Buffer.from(c));
    const kept = JSON.parse(Buffer.concat(parts).toString('utf8')) as KeptRewrite;
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

/** Keeps a rewrite, whole: a crash leaves the old one or none, never a torn one. Returns its path or URL. */
export async function writeRewrite(
  outRoot: string,
  options: EnhanceOptions,
  rewrite: Omit<KeptRewrite, 'model' | 'instructionsSha256'>,
): Promise<string> {
  const { store, key } = await placeOf(outRoot, options, rewrite.original);
  const kept: KeptRewrite = {
    model: options.model,
    instructionsSha256: sha256Hex(options.instructions),
    ...rewrite,
  };
  await store.put(key, `${JSON.stringify(kept, null, 2)}\n`, { contentType: 'application/json' });
  return store.urlOf(key);
}
