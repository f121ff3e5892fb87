// Pre-flight checks before an overnight run: gateway settings (the provider chosen), the rows it would refuse,
// key and models, Temporal, and the CSV.
import { Connection } from '@temporalio/client';
import { loadGatewaySettings, loadProvider, loadTemporalSettings } from '../config';
import { loadCsv } from '../input/csv';
import { AuthenticationError, PermissionDeniedError } from '../gateway/errors';
import { GatewayClient } from '../gateway/client';
import type { HttpCall } from '../gateway/provider';
import { DEFAULT_PROVIDER } from '../gateway/providers';
import type { PromptRow } from '../contract/rows';
import { findTemporalCli } from '../dev-server/cli-binary';

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

function describeError(err: unknown, provider = 'the gateway'): string {
  if (err instanceof AuthenticationError)
    return `401: ${provider} does not accept GATEWAY_API_KEY (missing, mistyped or deleted): ${err.message}`;
  if (err instanceof PermissionDeniedError)
    return `403: ${provider}: the key is disabled or has no access to this resource: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

/** A call as doctor names it: its method and its path under the base URL's own path (or its absolute URL). */
const shown = (baseUrl: string, call: HttpCall) =>
  call.path.startsWith('/')
    ? `${call.method} ${new URL(baseUrl).pathname.replace(/\/$/, '')}${call.path}`
    : `${call.method} ${call.path}`;

export async function runDoctor(env: NodeJS.ProcessEnv, csvPath?: string): Promise<Check[]> {
  const checks: Check[] = [];
  let rows: PromptRow[] = [];
  if (csvPath) {
    // Read for the chosen provider (its defaults, its refusals); an unknown one is the settings check's to say.
    const provider = (() => {
      try {
        return loadProvider(env);
      } catch {
        return undefined;
      }
    })();
    const parsed = await loadCsv(csvPath, { ...(provider ? { provider } : {}) }).catch((err: Error) => ({
      rows: [],
      problems: [{ reason: err.message }],
    }));
    rows = parsed.rows;
    checks.push({
      name: 'CSV',
      ok: parsed.problems.length === 0,
      detail: parsed.problems.length
        ? `${parsed.problems.length} problems (run \`vidbatch validate ${csvPath}\`)`
        : `${rows.length} rows, no problems`,
    });
  }

  try {
    const settings = loadGatewaySettings(env);
    const gateway = new GatewayClient(settings);
    const { provider } = gateway;
    const named = provider === DEFAULT_PROVIDER ? '' : `GATEWAY_PROVIDER=${provider.name}, `;
    checks.push({
      name: 'gateway settings',
      ok: true,
      detail: `${named}GATEWAY_BASE_URL=${settings.baseUrl}`,
    });
    // What the provider would refuse is known before any call: such rows would fail unsent.
    const requests = rows.map((r) => ({ row: r, ...gateway.prepare(r) }));
    const refused = requests.filter((r) => r.problem);
    if (rows.length)
      checks.push({
        name: 'requests',
        ok: refused.length === 0,
        detail: refused.length
          ? `${refused.length} rows ${provider.name} cannot take, e.g. line ${refused[0]!.row.line}: ${refused[0]!.problem}`
          : `every row is one ${provider.name} takes`,
      });
    if (!gateway.canListModels && gateway.canVerifyKey) {
      // A provider that lists no models: its own cheap call, which makes no job.
      try {
        await gateway.verifyKey();
        checks.push({
          name: 'gateway key',
          ok: true,
          detail: `${provider.name} accepts it: ${shown(settings.baseUrl, provider.keyCheck!)} answered`,
        });
      } catch (err) {
        checks.push({ name: 'gateway key', ok: false, detail: describeError(err, provider.name) });
      }
    } else if (!gateway.canListModels) {
      // Nothing to ask without paying: a refused key is found by the first submit, which makes no job then.
      checks.push({
        name: 'gateway key',
        ok: true,
        detail:
          `${provider.name}: not checked: it has no call that checks a key without making a job, so the key is ` +
          'checked only by the first submit (a refused key makes no job and pauses the batch)',
      });
    } else {
      try {
        const models = await gateway.listModels();
        checks.push({
          name: 'gateway key',
          ok: true,
          detail: `${provider.name} accepts it: ${shown(settings.baseUrl, provider.models!.call)} answered with ${models.length} models`,
        });
        const wanted = [
          ...new Set(rows.length ? requests.map((r) => r.request.model) : [provider.defaultModel]),
        ];
        const missing = wanted.filter((m) => !models.includes(m));
        checks.push({
          name: 'models',
          ok: missing.length === 0,
          detail: missing.length
            ? `not available to this key: ${missing.join(', ')}`
            : `available: ${wanted.join(', ')}`,
        });
      } catch (err) {
        checks.push({ name: 'gateway key', ok: false, detail: describeError(err, provider.name) });
      }
    }
  } catch (err) {
    checks.push({ name: 'gateway settings', ok: false, detail: describeError(err) });
  }

  const temporal = loadTemporalSettings(env);
  if (temporal.address) {
    try {
      const connection = await Connection.connect({ ...temporal.connectionOptions, connectTimeout: 5000 });
      try {
        await connection.workflowService.describeNamespace({ namespace: temporal.namespace });
        checks.push({
          name: 'Temporal',
          ok: true,
          detail: `${temporal.address}, namespace ${temporal.namespace}`,
        });
      } finally {
        await connection.close();
      }
    } catch (err) {
      checks.push({ name: 'Temporal', ok: false, detail: `${temporal.address}: ${describeError(err)}` });
    }
  } else {
    const cli = await findTemporalCli({ env, provision: false }).catch(() => undefined);
    checks.push({
      name: 'Temporal',
      ok: true,
      detail: cli
        ? `no TEMPORAL_ADDRESS: the embedded dev server will run (${cli.path})`
        : 'no TEMPORAL_ADDRESS and no Temporal CLI yet: the first run builds one with Go (a few minutes)',
    });
  }
  return checks;
}
