// /admin: the console's key management (spec 2.4: create, disable, enable, delete) and the test controls
// (counters, faults, options, hold, outage, one job's record). Served on loopback only.
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import type { ApiKeyRecord } from './api-keys';
import type { FaultOptions } from './fault-settings';
import { HttpError, isLoopback, parseBody, readJson, settle, type RouteContext } from './http';
import type { RuntimeOptionsInput } from './settings';

const holdSchema = z.union([
  z.strictObject({ seconds: z.number().positive() }),
  z.strictObject({ until: z.union([z.number(), z.iso.datetime({ offset: true })]) }),
]);

const publicKey = (k: ApiKeyRecord) => ({
  id: k.id,
  description: k.description,
  enabled: k.enabled,
  models: k.models,
});

/** Answers one admin request; `after` runs once the answer is out (for controls that cut connections). */
export async function adminRoutes(
  ctx: RouteContext,
  req: IncomingMessage,
  path: string,
): Promise<{ status: number; body: unknown; after?: () => void }> {
  const { state } = ctx;
  if (!isLoopback(req)) throw new HttpError(403, 'forbidden', 'The admin API is only served on loopback.');
  const ok = (body: unknown, status = 200) => ({ status, body });
  const route = `${req.method} ${path}`;
  if (route === 'POST /admin/keys') {
    const body = parseBody(
      z.object({ description: z.string().optional(), models: z.array(z.string()).optional() }),
      await readJson(req).catch(() => ({})),
    );
    const record = state.createKey(body.description ?? '', body.models);
    return ok({ ...publicKey(record), key: record.key }, 201);
  }
  if (route === 'GET /admin/keys') return ok({ data: [...state.keys.values()].map(publicKey) });
  if (route === 'GET /admin/stats') return ok(state.snapshot());
  if (route === 'GET /admin/faults') return ok(state.faults);
  if (route === 'POST /admin/faults') {
    const body = (await readJson(req)) as Partial<FaultOptions>;
    return ok(settle(() => state.setFaults(body)));
  }
  if (route === 'GET /admin/options') return ok(state.options);
  if (route === 'POST /admin/options') {
    const body = (await readJson(req)) as RuntimeOptionsInput;
    return ok(settle(() => state.setOptions(body)));
  }
  const holdView = () => ({
    holdUntil: state.holdUntil ? new Date(state.holdUntil).toISOString() : null,
    remainingMs: state.holdWait(),
  });
  if (route === 'GET /admin/hold') return ok(holdView());
  if (route === 'POST /admin/hold') {
    const body = parseBody(holdSchema, await readJson(req));
    const until =
      'seconds' in body
        ? state.now() + body.seconds * 1000
        : typeof body.until === 'number'
          ? body.until
          : Date.parse(body.until);
    state.setHold(until);
    return ok(holdView());
  }
  if (route === 'DELETE /admin/hold') {
    state.setHold(undefined);
    return ok(holdView());
  }
  if (route === 'POST /admin/outage') {
    const { seconds } = parseBody(z.strictObject({ seconds: z.number().positive() }), await readJson(req));
    return {
      status: 200,
      body: { refusingForMs: seconds * 1000 },
      after: () => ctx.refuseConnections(seconds * 1000),
    };
  }
  const jobMatch = /^\/admin\/jobs\/([^/]+)$/.exec(path);
  if (req.method === 'GET' && jobMatch) {
    const job = state.jobs.get(decodeURIComponent(jobMatch[1] ?? ''));
    if (!job) throw new HttpError(404, 'not_found', `No job with id ${jobMatch[1]}.`);
    return ok({
      id: job.id,
      keyId: job.keyId,
      status: state.jobStatus(job),
      gone: state.isGone(job),
      idempotencyKey: job.idempotencyKey ?? null,
      checks: job.checks ?? 0,
      idDelivered: job.idDelivered ?? null,
      resultDelivered: job.resultDelivered ?? null,
      createdAt: new Date(job.createdAt).toISOString(),
      doneAt: new Date(job.doneAt).toISOString(),
    });
  }
  const keyMatch = /^\/admin\/keys\/([^/]+)(?:\/(enable|disable))?$/.exec(path);
  const record = keyMatch ? state.keys.get(keyMatch[1] ?? '') : undefined;
  if (keyMatch && !record) throw new HttpError(404, 'not_found', `No key with id ${keyMatch[1]}.`);
  if (record && req.method === 'POST' && keyMatch?.[2]) {
    record.enabled = keyMatch[2] === 'enable';
    return ok(publicKey(record));
  }
  if (record && req.method === 'DELETE' && !keyMatch?.[2]) {
    state.keys.delete(record.id);
    return ok({ id: record.id, deleted: true });
  }
  throw new HttpError(404, 'not_found', `No route for ${req.method} ${path}.`);
}
