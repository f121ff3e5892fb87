// API keys as the console manages them (create, disable, enable, delete) and how /v1 requests are checked
// against them: 401 for a missing, unknown or deleted key, 403 for a disabled key or a model the key may not
// use (spec section 5). Every refusal is counted, so tests can tell how many requests a client sent with a
// refused key.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { HttpError } from './http';

export interface ApiKeyRecord {
  id: string;
  key: string;
  description: string;
  enabled: boolean;
  /** Models this key may use; undefined = all. */
  models: string[] | undefined;
  createdAt: number;
  /** /v1 requests refused because this key was disabled or deleted. */
  refusedRequests?: number;
}

/** Refusals of requests that carried no registered key at all. */
export interface KeylessCounters {
  /** /v1 requests sent with a key that is not registered (never was). */
  requestsWithUnknownKey: number;
  requestsWithoutKey: number;
}

export class KeyRing {
  /** The keys that exist now, by id. */
  readonly keys = new Map<string, ApiKeyRecord>();
  /** Every key ever registered, by secret: a key removed from `keys` is "deleted", not "unknown". */
  private readonly everKeys = new Map<string, ApiKeyRecord>();

  create(createdAt: number, description = '', models?: string[], key?: string): ApiKeyRecord {
    const record: ApiKeyRecord = {
      id: `key_${randomBytes(6).toString('hex')}`,
      key: key ?? `sk-${randomBytes(24).toString('base64url')}`,
      description,
      enabled: true,
      models,
      createdAt,
    };
    if (!record.key.startsWith('sk-')) throw new Error('API keys start with sk-');
    this.keys.set(record.id, record);
    this.everKeys.set(record.key, record);
    return record;
  }

  find(secret: string): ApiKeyRecord | undefined {
    for (const record of this.keys.values()) if (record.key === secret) return record;
    return undefined;
  }

  /** A key that was registered once and has since been deleted. */
  deleted(secret: string): ApiKeyRecord | undefined {
    const record = this.everKeys.get(secret);
    return record && !this.exists(record) ? record : undefined;
  }

  countRefused(record: ApiKeyRecord): void {
    record.refusedRequests = (record.refusedRequests ?? 0) + 1;
  }

  /** Requests refused per key id, for the deleted keys or for the others (disabled). */
  refusedPerKey(deleted: boolean): Record<string, number> {
    return Object.fromEntries(
      [...this.everKeys.values()]
        .filter((k) => !this.exists(k) === deleted && (k.refusedRequests ?? 0) > 0)
        .map((k) => [k.id, k.refusedRequests ?? 0]),
    );
  }

  persistable() {
    return {
      keys: [...this.keys.values()],
      deletedKeys: [...this.everKeys.values()].filter((k) => !this.exists(k)),
    };
  }

  restore(keys: ApiKeyRecord[], deletedKeys: ApiKeyRecord[] = []): void {
    for (const k of keys) {
      if (this.find(k.key)) continue;
      this.keys.set(k.id, k);
      this.everKeys.set(k.key, k);
    }
    for (const k of deletedKeys) if (!this.everKeys.has(k.key)) this.everKeys.set(k.key, k);
  }

  private exists(record: ApiKeyRecord): boolean {
    return this.keys.get(record.id) === record;
  }
}

/** The key of a /v1 request (`Authorization: Bearer <key>`), or the 401/403 the spec gives. */
export function authenticate(req: IncomingMessage, ring: KeyRing, counters: KeylessCounters): ApiKeyRecord {
  const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
  const secret = match?.[1];
  if (!secret) {
    counters.requestsWithoutKey += 1;
    throw new HttpError(401, 'unauthorized', 'unauthorized');
  }
  const record = ring.find(secret);
  if (!record) {
    const deleted = ring.deleted(secret);
    if (deleted) ring.countRefused(deleted);
    else counters.requestsWithUnknownKey += 1;
    throw new HttpError(401, 'unauthorized', 'unauthorized');
  }
  if (!record.enabled) {
    ring.countRefused(record);
    throw new HttpError(403, 'key_disabled', 'This API key is disabled.');
  }
  return record;
}

/** 400 for a model the gateway does not have, 403 for one this key may not use. */
export function requireModel(key: ApiKeyRecord, model: string, known: string[]): void {
  if (!known.includes(model)) throw new HttpError(400, 'invalid_request', `model: unknown model ${model}`);
  if (key.models && !key.models.includes(model)) {
    throw new HttpError(403, 'model_access_denied', `This API key has no access to model ${model}.`);
  }
}
