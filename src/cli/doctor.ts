// Pre-flight checks before an overnight run: gateway settings, key and models, Temporal, and the CSV.
import { Connection } from '@temporalio/client';
import { loadGatewaySettings, loadTemporalSettings } from '../config';
import { loadCsv } from '../input/csv';
import { AuthenticationError, PermissionDeniedError } from '../gateway/errors';
import { GatewayClient } from '../gateway/client';
import type { PromptRow } from '../contract/rows';
import { findTemporalCli } from '../dev-server/cli-binary';

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

function describeError(err: unknown): string {
  if (err instanceof AuthenticationError)
    return `401: the gateway does not accept GATEWAY_API_KEY (missing, mistyped or deleted): ${err.message}`;
  if (err instanceof PermissionDeniedError)
    return `403: the key is disabled or has no access to this resource: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

export async function runDoctor(env: NodeJS.ProcessEnv, csvPath?: string): Promise<Check[]> {
  const checks: Check[] = [];
  let rows: PromptRow[] = [];
  if (csvPath) {
    const parsed = await loadCsv(csvPath).catch((err: Error) => ({
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
    checks.push({ name: 'gateway settings', ok: true, detail: `GATEWAY_BASE_URL=${settings.baseUrl}` });
    try {
      const models = await new GatewayClient(settings).listModels();
      checks.push({
        name: 'gateway key',
        ok: true,
        detail: `GET /v1/models answered with ${models.length} models`,
      });
      const wanted = [...new Set(rows.length ? rows.map((r) => r.model) : ['modelfamily-1.0-r2v'])];
      const missing = wanted.filter((m) => !models.includes(m));
      checks.push({
        name: 'models',
        ok: missing.length === 0,
        detail: missing.length
          ? `not available to this key: ${missing.join(', ')}`
          : `available: ${wanted.join(', ')}`,
      });
    } catch (err) {
      checks.push({ name: 'gateway key', ok: false, detail: describeError(err) });
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
