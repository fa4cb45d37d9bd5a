/**
 * Every API key the test run mints is recorded as a minted secret (minted-secrets.ts), so that the run-wide
 * leak scan searches the run log and the database for it as for the fixed test secrets. A key a spec made
 * and never recorded would leak unnoticed: specs POST /v1/api-keys through postApiKey (createKey in
 * test-app.ts does too), and one that reads keys out of other answers (a fuzzer) passes them to
 * recordReturnedApiKey.
 */
import type { Response } from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';

/**
 * A key the gateway mints: tgw_ and its random part (api-key-hash.ts). Only such a value is recorded: a
 * `key` field of another answer (a feature flag's name) is no secret, and would be found everywhere.
 */
export const MINTED_API_KEY = /^tgw_[\w-]{24,}$/;

/** A label is one field of a `label\tvalue` line: no tab or line break from an answer may split it. */
const labelPart = (text: string): string => text.replace(/[\t\r\n]/g, ' ');

/** Records `key` (not of the minted form: nothing) under `API key (<role>, <via>)`. */
export function recordApiKey(key: string, role: string, via: string): void {
  if (MINTED_API_KEY.test(key)) recordMintedSecret(`API key (${labelPart(role)}, ${labelPart(via)})`, key);
}

/**
 * Records the API key an answer carries (body.key), whatever its status: a key handed out is a key to look
 * for, even in an answer the spec expected to be a refusal. Returns it, or undefined when there is none.
 */
export function recordReturnedApiKey(res: Response, via: string): string | undefined {
  const body = res.body as { key?: unknown; role?: unknown } | null | undefined;
  if (typeof body?.key !== 'string' || !MINTED_API_KEY.test(body.key)) return undefined;
  recordApiKey(body.key, typeof body.role === 'string' ? body.role : 'role not given', via);
  return body.key;
}

/**
 * POST /v1/api-keys as `auth` with `body` (anything: specs send bad input too) and the answer as it came,
 * for the spec to check; the key it returns, if any, is recorded first.
 */
export async function postApiKey(http: Pick<TestAgent, 'post'>, auth: Record<string, string>, body: object, via = 'postApiKey'): Promise<Response> {
  const res = await http.post('/v1/api-keys').set(auth).send(body);
  recordReturnedApiKey(res, via);
  return res;
}

/** The id of the org's first key of `role`, as GET /v1/api-keys lists it (to revoke the key setupOrg made, say). */
export async function keyIdOfRole(http: Pick<TestAgent, 'get'>, auth: Record<string, string>, orgId: string, role: string): Promise<string> {
  const keys = await http.get(`/v1/api-keys?orgId=${orgId}`).set(auth);
  const key = (keys.body.items as { id: string; role: string }[]).find((k) => k.role === role);
  if (!key) throw new Error(`org ${orgId} has no ${role} key`);
  return key.id;
}
