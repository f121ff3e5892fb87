// The rate limit a gateway publishes in its answers' headers, when it does (the spec shows none): the IETF
// draft's `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers). Its policies state a quota and the window
// it is counted over, in both of the shapes in use:
//   RateLimit-Policy: 10;w=1, 1000;w=3600            (draft 07 and earlier: the quota first)
//   RateLimit-Policy: "burst";q=10;w=1, "day";q=1000;w=86400   (draft 08 on: named, quota as `q`)
// A policy's rate is its quota over its window; the request-rate limit is the policy with the shortest window
// (the longer ones are quotas, which a 429 with its Retry-After tells when they run out). Headers that state no
// window (`RateLimit-Limit` alone, `X-RateLimit-Limit`, OpenAI's `x-ratelimit-limit-requests`) give no rate
// and are not read: taking a per-minute count for a per-second one would be sixty times wrong.

/** A response's headers as undici gives them. */
export type ResponseHeaders = Record<string, string | string[] | undefined>;

interface Policy {
  quota: number;
  windowS: number;
}

/** The parameters of one policy (`10;w=1` or `"name";q=10;w=1`), or undefined when it states no quota or window. */
function policyOf(item: string): Policy | undefined {
  const [head = '', ...params] = item.split(';').map((p) => p.trim());
  const values = new Map(
    params.map((p) => {
      const at = p.indexOf('=');
      return at < 0 ? [p.toLowerCase(), ''] : [p.slice(0, at).trim().toLowerCase(), p.slice(at + 1).trim()];
    }),
  );
  const number = (text: string | undefined) =>
    text && /^\d+(\.\d+)?$/.test(text) ? Number(text) : undefined;
  const quota = number(values.get('q')) ?? number(head);
  const windowS = number(values.get('w'));
  if (quota === undefined || windowS === undefined || quota <= 0 || windowS <= 0) return undefined;
  return { quota, windowS };
}

/**
 * The requests per second the gateway publishes (the `RateLimit-Policy` with the shortest window), or
 * undefined when it publishes none that can be read.
 */
export function publishedRate(headers: ResponseHeaders): number | undefined {
  const raw = headers['ratelimit-policy'];
  const text = Array.isArray(raw) ? raw.join(',') : raw;
  if (!text || text.length > 1000) return undefined;
  let shortest: Policy | undefined;
  for (const item of text.split(',')) {
    const policy = policyOf(item);
    if (policy && (!shortest || policy.windowS < shortest.windowS)) shortest = policy;
  }
  return shortest && shortest.quota / shortest.windowS;
}
