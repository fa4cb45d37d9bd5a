import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FiniteTimes1766400000000 } from '../../migrations/1766400000000-finite-times.js';
import { MIGRATIONS } from '../../migrations/index.js';
import { runMigrations } from '../../src/db/migration-runner.js';
import { migratorOptions } from '../../src/db/db-options.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { insertCalls, insertRun } from './ledger-seed.js';

/**
 * A time of ±infinity written around the gateway: pg reads it as the number ±Infinity, whose toISOString() throws.
 * Migration 1766400000000 repairs such rows in the mutable tables and refuses new ones, as 1765200000000 did for
 * tool_calls: before it, one api_keys row dated `infinity` made every platform-wide GET /v1/api-keys a 500 (infinity
 * sorts first: page 1), one approval did the same to GET /v1/approvals. policy_decisions, a record, keeps its rows
 * (NOT VALID) and a tool call's story shows them. A scratch database migrated to the migration before, with the rows
 * written there, then the gateway started on it (which applies the rest).
 */
describe('times of ±infinity in the mutable tables (migration 1766400000000)', () => {
  let db: ScratchDatabase;
  let t: TestApp | undefined;
  const org = randomUUID();
  const revokedKey = randomUUID();
  let call: string;
  let approval: string;

  beforeAll(async () => {
    db = await createScratchDatabase('tg_finite_times');
    const before = MIGRATIONS.slice(0, MIGRATIONS.indexOf(FiniteTimes1766400000000));
    const old = await new DataSource({ ...migratorOptions(db.url), migrations: before }).initialize();
    try {
      await runMigrations(old);
      await old.query(`INSERT INTO orgs (id, name, created_at) VALUES ($1, 'Forged', 'infinity')`, [org]);
      const run = await insertRun(old, org);
      [{ id: call }] = await insertCalls(old, [{ orgId: org, runId: run, status: 'blocked', errorCode: 'EXPERT_REJECTED' }]);
      approval = randomUUID();
      await old.query(
        `INSERT INTO approval_requests (id, org_id, tool_call_id, run_id, kind, status, tool_name, action, input_redacted, risk_level, reason, action_digest,
                                        created_at, expires_at, decided_at)
         VALUES ($1, $2, $3, $4, 'expert', 'rejected', 'order_lookup', 'lookup', '{}', 'low', 'r', repeat('ab', 32), 'infinity', '-infinity', 'infinity')`,
        [approval, org, call, run],
      );
      await old.query(
        `INSERT INTO api_keys (id, org_id, role, name, key_hash, key_prefix, created_at, revoked_at, last_used_at)
         VALUES ($1, $2, 'ops', 'forged', $3, 'tgw_forged', 'infinity', '-infinity', 'infinity')`,
        [revokedKey, org, 'f'.repeat(64)],
      );
      await old.query(
        `INSERT INTO policy_decisions (id, org_id, tool_call_id, decision, risk_level, reason, action_digest, created_at)
         VALUES ($1, $2, $3, 'allow', 'low', 'r', repeat('ab', 32), 'infinity')`,
        [randomUUID(), org, call],
      );
    } finally {
      await old.destroy();
    }
    t = await startTestApp({ DATABASE_URL: db.url, LEDGER_SEAL_INTERVAL_MS: '60000' });
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('repairs the rows from before: an infinite time becomes the migration time, a revoked key stays revoked, NULLs stay NULL', async () => {
    const [key] = (await t!.ds.query(`SELECT isfinite(created_at) AS c, isfinite(revoked_at) AS r, isfinite(last_used_at) AS u FROM api_keys WHERE id = $1`, [revokedKey])) as {
      c: boolean; r: boolean; u: boolean;
    }[];
    expect(key).toEqual({ c: true, r: true, u: true });
    const [a] = (await t!.ds.query(`SELECT isfinite(created_at) AND isfinite(expires_at) AND isfinite(decided_at) AS ok FROM approval_requests WHERE id = $1`, [approval])) as {
      ok: boolean;
    }[];
    expect(a.ok).toBe(true);
    const [{ nulls }] = (await t!.ds.query(`SELECT count(*)::int AS nulls FROM api_keys WHERE revoked_at IS NULL`)) as { nulls: number }[];
    expect(nulls).toBeGreaterThan(0); // the bootstrap admin key, never revoked: not given a time
  });

  it('GET /v1/approvals and GET /v1/api-keys answer 200 for the org and platform-wide (500 before)', async () => {
    for (const query of [{ orgId: org }, {}]) {
      const approvals = await t!.http.get('/v1/approvals').query(query).set(adminAuth);
      expect(approvals.status, JSON.stringify(approvals.body)).toBe(200);
      expect((approvals.body.items as { id: string }[]).map((x) => x.id)).toContain(approval);
      const keys = await t!.http.get('/v1/api-keys').query(query).set(adminAuth);
      expect(keys.status, JSON.stringify(keys.body)).toBe(200);
      const forged = (keys.body.items as { id: string; revokedAt: string | null }[]).find((k) => k.id === revokedKey);
      expect(forged?.revokedAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    }
    const orgs = await t!.http.get(`/v1/orgs/${org}`).set(adminAuth);
    expect(orgs.status, JSON.stringify(orgs.body)).toBe(200);
  });

  it("a tool call's story shows its policy decision dated infinity, kept as written (200, not 500)", async () => {
    const ops = (await createKey(t!, org, 'ops')).key;
    const res = await t!.http.get(`/v1/tool-calls/${call}`).set(bearer(ops));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.policyDecision.createdAt).toBe('infinity');
  });

  it('refuses a new infinite time in every repaired table (check_violation), and in policy_decisions', async () => {
    const other = await createOrg(t!, 'Another');
    const refused = async (sql: string, params: unknown[]): Promise<string | undefined> => {
      try {
        await t!.ds.query(sql, params);
        return undefined;
      } catch (e) {
        return (e as { code?: string }).code;
      }
    };
    expect(await refused(`UPDATE api_keys SET last_used_at = 'infinity' WHERE id = $1`, [revokedKey])).toBe('23514');
    expect(await refused(`UPDATE approval_requests SET expires_at = 'infinity' WHERE id = $1`, [approval])).toBe('23514');
    expect(await refused(`UPDATE orgs SET created_at = '-infinity' WHERE id = $1`, [other])).toBe('23514');
    expect(await refused(`UPDATE agent_runs SET updated_at = 'infinity' WHERE org_id = $1`, [org])).toBe('23514');
    expect(
      await refused(`INSERT INTO policy_decisions (id, org_id, tool_call_id, decision, risk_level, reason, action_digest, created_at)
                     VALUES ($1, $2, $3, 'allow', 'low', 'r', 'ab', '-infinity')`, [randomUUID(), org, call]),
    ).toBe('23514');
    const [{ named }] = (await t!.ds.query(`SELECT count(*)::int AS named FROM pg_constraint WHERE conname LIKE '%\\_times\\_finite'`)) as { named: number }[];
    expect(named).toBe(13); // tool_calls' from 1765200000000, eleven mutable tables, policy_decisions
  });
});
