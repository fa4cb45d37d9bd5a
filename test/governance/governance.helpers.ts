import { expect } from 'vitest';
import { governanceLocksSharedSql } from '../../src/db/advisory-locks.js';
import { bearer, type TestApp } from '../support/test-app.js';

/** A permission row as PUT /v1/orgs/:orgId/tool-permissions takes it. */
export interface PermissionItem {
  toolName: string;
  action: string;
  specialistId: string | null;
  enabled: boolean;
}

/** The run body of API.md §3. */
export interface RunBody {
  id: string;
  orgId: string;
  specialistId: string;
  status: string;
  pendingApprovalCount: number;
  totalCostCents: number;
  manifest: { allowedTools: string[] };
  createdAt: string;
}

export interface EventRow {
  type: string;
  run_id: string | null;
  actor: { keyId: string; role: string } | null;
  metadata: Record<string, unknown>;
}

export const allow = (toolName: string, action: string, specialistId: string | null = null): PermissionItem => ({ toolName, action, specialistId, enabled: true });
export const deny = (toolName: string, action: string, specialistId: string | null = null): PermissionItem => ({ toolName, action, specialistId, enabled: false });

/** PUTs the permission set and fails the test unless it was accepted. */
export async function putPermissions(t: TestApp, orgId: string, key: string, items: PermissionItem[]): Promise<void> {
  const res = await t.http.put(`/v1/orgs/${orgId}/tool-permissions`).set(bearer(key)).send({ items });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

/** Creates a run with an agent key and fails the test unless it answered 201. */
export async function createRun(t: TestApp, agentKey: string, specialistId: string): Promise<RunBody> {
  const res = await t.http.post('/v1/runs').set(bearer(agentKey)).send({ specialistId });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as RunBody;
}

export async function allowedToolsOf(t: TestApp, agentKey: string, specialistId: string): Promise<string[]> {
  return (await createRun(t, agentKey, specialistId)).manifest.allowedTools;
}

/** The org's events of one type, oldest first. */
export async function eventsOf(t: TestApp, orgId: string, type: string): Promise<EventRow[]> {
  return (await t.ds.query(`SELECT type, run_id, actor, metadata FROM runtime_ledger_events WHERE org_id = $1 AND type = $2 ORDER BY seq`, [
    orgId,
    type,
  ])) as EventRow[];
}

/** A problem+json body minus the per-request correlation id, to compare two answers. */
export function withoutCorrelation(body: Record<string, unknown>): Record<string, unknown> {
  const { correlationId: _ignored, ...rest } = body;
  return rest;
}

export function expectProblem(res: { status: number; headers: Record<string, string>; body: Record<string, unknown> }, status: number, code: string): void {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
  expect(res.body.code).toBe(code);
}

/**
 * A call of `orgId` being recorded, stood for by a transaction of its own holding exactly what the intent statement
 * holds until it commits: the org's flag and policy locks shared (advisory-locks.ts, "Fair turns"), then the flag and
 * policy rows FOR SHARE. `done` commits it.
 */
export async function callBeingRecorded(t: TestApp, orgId: string): Promise<{ done: () => Promise<void> }> {
  const q = t.ds.createQueryRunner();
  await q.connect();
  await q.startTransaction();
  await q.query(`SET LOCAL lock_timeout = '10s'`);
  await q.query(
    `WITH fair AS (${governanceLocksSharedSql('$1::uuid')})
     SELECT (SELECT enabled FROM feature_flags WHERE org_id = $1 AND flag = 'tool_calling_enabled' FOR SHARE),
            (SELECT version FROM policies WHERE org_id = $1 FOR SHARE) FROM fair`,
    [orgId],
  );
  return {
    done: async () => {
      await q.commitTransaction();
      await q.release();
    },
  };
}
