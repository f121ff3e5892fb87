// Telling a store URL from a path, with no dependency: CLI modules loaded for `--help` use it.

/** True for a reference into a shared store (an `s3://` URL) rather than a path on this machine. */
export const isStoreUrl = (path: string) => path.startsWith('s3://');

/** `dir/name` for a folder that may be a store URL (path.join would fold its `//`). */
export const joinStorePath = (dir: string, name: string) => `${dir.replace(/\/+$/, '')}/${name}`;
