/**
 * Small helpers shared by the executor e2e tests: post a tool_use through the
 * real pipeline, read back the ledger row and its events, wait for the
 * emulator to see something.
 */
import type { Harness, OrgSetup } from '../support/scenario.js';
import { setupOrg, toolUse } from '../support/scenario.js';
import type { TestApp } from '../support/test-app.js';
import { bearer } from '../support/test-app.js';

export type ToolUse = ReturnType<typeof toolUse>;

export interface LedgerEvent {
  type: string;
  actor?: unknown;
  metadata: Record<string, unknown>;
}

/** POST /v1/runs/:runId/tool-calls with the org's agent key. */
export function send(h: Harness, org: OrgSetup, use: ToolUse, headers: Record<string, string> = {}) {
  return h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).set(headers).send(use);
}

/** A fresh tool_use of `name` with `input`, posted. */
export function call(h: Harness, org: OrgSetup, name: string, input: Record<string, unknown>) {
  return send(h, org, toolUse(name, input));
}

export async function rowOf(h: Harness, id: string): Promise<Record<string, unknown>> {
  const [row] = (await h.t.ds.query('SELECT * FROM tool_calls WHERE id = $1', [id])) as Record<string, unknown>[];
  return row;
}

/** The @idempotent key of every refundCreate the emulator received since request number `from`. */
export function refundKeysSince(h: Harness, from: number): (string | undefined)[] {
  return h.emu.requests
    .slice(from)
    .filter((r) => r.body.includes('refundCreate'))
    .map((r) => /@idempotent\(key: \\"([^\\]+)\\"\)/.exec(r.body)?.[1]);
}

export async function eventsOf(h: Harness, id: string): Promise<LedgerEvent[]> {
  return (await h.t.ds.query('SELECT type, actor, metadata FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq', [id])) as LedgerEvent[];
}

/** Polls `check` every 5 ms until it holds (or fails after `timeoutMs`). */
export async function waitFor(check: () => boolean, timeoutMs = 3_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error('waitFor: condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** An org that may use the Nango proxy, POST included (allowed by a policy rule instead of waiting for approval). */
export function setupNangoOrg(t: TestApp): Promise<OrgSetup> {
  return setupOrg(t, {
    tools: ['nango_proxy.get', 'nango_proxy.post'],
    vendors: ['nango'],
    rules: [{ id: 'allow-nango-post', match: { toolName: 'nango_proxy.post' }, decision: 'allow' }],
  });
}
