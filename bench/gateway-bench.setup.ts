/**
 * The benchmark's org, set up over HTTP as an admin would: flag on, two
 * permitted actions, Shopify credentials, a policy rule blocking one of them,
 * an agent key and a run. Then one request of each kind to check the wiring.
 */
import { SHOPIFY_EMULATOR_TOKEN } from '../src/emulator/index.js';

export const BENCH_ADMIN_KEY = 'tgw_bench-bootstrap-admin-key-0123456789abcdef';
export const BENCH_MASTER_KEY = Buffer.alloc(32, 0x42).toString('base64');
export const ALLOWED = { name: 'order_lookup', input: { action: 'lookup', orderId: '12345' } };
export const BLOCKED = { name: 'shopify_query', input: { action: 'get_product', productId: '632910392' } };
export const BLOCK_RULE = { id: 'bench-block', match: { toolName: 'shopify_query.get_product' }, decision: 'block', reason: 'benchmark: blocked by policy' };

export interface BenchOrg {
  orgId: string;
  agentKey: string;
  runId: string;
  /** POST path of the run's tool calls */
  toolCallPath: string;
}

interface Reply {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

async function call(base: string, method: string, path: string, key: string, body?: unknown): Promise<Reply> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    parsed = { text };
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

function expect(res: Reply, status: number, what: string): Record<string, unknown> {
  if (res.status !== status) throw new Error(`setup: ${what} answered ${res.status} (expected ${status}): ${JSON.stringify(res.body).slice(0, 500)}`);
  return res.body;
}

export function toolUse(spec: { name: string; input: Record<string, unknown> }, id: string): string {
  return JSON.stringify({ type: 'tool_use', id, name: spec.name, input: spec.input });
}

export async function setupBenchOrg(base: string): Promise<BenchOrg> {
  const admin = BENCH_ADMIN_KEY;
  const orgId = expect(await call(base, 'POST', '/v1/orgs', admin, { name: 'Bench Org' }), 201, 'create org').id as string;
  const agentKey = expect(await call(base, 'POST', '/v1/api-keys', admin, { orgId, role: 'agent', name: 'bench agent' }), 201, 'agent key').key as string;
  expect(await call(base, 'PUT', `/v1/orgs/${orgId}/feature-flags/tool_calling_enabled`, admin, { enabled: true }), 200, 'feature flag');
  const items = [
    { toolName: 'order_lookup', action: 'lookup', specialistId: null, enabled: true },
    { toolName: 'shopify_query', action: 'get_product', specialistId: null, enabled: true },
  ];
  expect(await call(base, 'PUT', `/v1/orgs/${orgId}/tool-permissions`, admin, { items }), 200, 'tool permissions');
  const config = { shopDomain: 'bench-emulator.myshopify.com', accessToken: SHOPIFY_EMULATOR_TOKEN };
  expect(await call(base, 'PUT', `/v1/orgs/${orgId}/integrations/shopify/credentials`, admin, { config }), 200, 'shopify credentials');
  expect(await call(base, 'PUT', `/v1/orgs/${orgId}/policies`, admin, { rules: [BLOCK_RULE] }), 200, 'policies');
  const run = expect(await call(base, 'POST', '/v1/runs', agentKey, { specialistId: 'bench' }), 201, 'create run');
  const allowedTools = (run.manifest as { allowedTools?: string[] } | undefined)?.allowedTools ?? [];
  for (const t of ['order_lookup.lookup', 'shopify_query.get_product']) {
    if (!allowedTools.includes(t)) throw new Error(`setup: run manifest lacks ${t}: ${JSON.stringify(allowedTools)}`);
  }
  const runId = run.id as string;
  return { orgId, agentKey, runId, toolCallPath: `/v1/runs/${runId}/tool-calls` };
}

/** One call of each kind, checked field by field, before any load. `replayId` is left warm for the replay target. */
export async function checkWiring(base: string, org: BenchOrg, replayId: string): Promise<void> {
  const post = (body: string): Promise<Reply> =>
    fetch(`${base}${org.toolCallPath}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.agentKey}`, 'content-type': 'application/json' },
      body,
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown>, headers: r.headers }));

  const allowed = expect(await post(toolUse(ALLOWED, `toolu_check_allowed_${Date.now()}`)), 200, 'allowed order_lookup.lookup');
  if (allowed.status !== 'succeeded' || allowed.replayed !== false) throw new Error(`setup: allowed call: ${JSON.stringify(allowed).slice(0, 500)}`);
  const blocked = expect(await post(toolUse(BLOCKED, `toolu_check_blocked_${Date.now()}`)), 403, 'blocked shopify_query.get_product');
  if (blocked.status !== 'blocked' || blocked.errorCode !== 'POLICY_BLOCKED') throw new Error(`setup: blocked call: ${JSON.stringify(blocked).slice(0, 500)}`);
  const first = expect(await post(toolUse(ALLOWED, replayId)), 200, 'replay warm call');
  if (first.status !== 'succeeded') throw new Error(`setup: replay warm call: ${JSON.stringify(first).slice(0, 500)}`);
  const again = await post(toolUse(ALLOWED, replayId));
  expect(again, 200, 'replay');
  if (again.body.replayed !== true || again.headers.get('idempotent-replayed') !== 'true') {
    throw new Error(`setup: the second post of ${replayId} was not a replay: ${JSON.stringify(again.body).slice(0, 500)}`);
  }
}
