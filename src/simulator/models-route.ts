// The models the simulated gateway has (spec section 9: one model id per version) and GET /v1/models, which
// lists those the key may use.
import type { ApiKeyRecord } from './api-keys';
import type { V1Result } from './http';

export const VIDEO_MODELS = ['modelfamily-1.0-r2v', 'modelfamily-1.1-r2v'];
export const CHAT_MODELS = ['modelfamily-chat-1.0'];

/** GET /v1/models; undefined for any other request. */
export function modelsRoute(
  method: string | undefined,
  path: string,
  key: ApiKeyRecord,
): V1Result | undefined {
  if (method !== 'GET' || path !== '/v1/models') return undefined;
  const models = [...VIDEO_MODELS, ...CHAT_MODELS].filter((m) => !key.models || key.models.includes(m));
  const data = models.map((id) => ({ id, object: 'model', owned_by: 'gateway' }));
  return { status: 200, body: { object: 'list', data } };
}
