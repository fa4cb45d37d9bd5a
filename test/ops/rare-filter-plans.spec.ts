import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orgIdSql, seed } from '../../bench/ledger-bench.seed.js';
import { approvalsSizedPageSql } from '../../src/approvals/approvals-listing.sql.js';
import { runMigrations } from '../../src/db/migration-runner.js';
import { migratorOptions } from '../../src/db/db-options.js';
import { ledgerEventsSizedPageSql } from '../../src/ops/ledger-events.sql.js';
import { LIST_PAGE_BYTES, toolCallsSizedPageSql } from '../../src/ops/tool-calls.sql.js';
import { INDETERMINATE_GAUGE_SQL } from '../../src/ops/approvals-gauge.service.js';
import { ENDED_RUNS_WITH_PENDING_APPROVALS_SQL } from '../../src/runs/runs.service.js';
import { planNodes, planSummary, type PlanNode } from '../support/query-plan.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';

/**
 * Lookups of a rare value with no index of their own read a whole table once the ledger is large (migration
 * 1766100000000: 440–714 ms at 2,000,000 calls and 4,000,000 events, growing with them): a platform key's listing of
 * the reconcile work list (status=indeterminate) or of a rare event type, and the periodic pass finishing ended runs,
 * which read every approval ever made. Each must be read off its partial index, on the ledger benchmark's data made
 * production-like (unknown outcomes reconciled but a few, rare events, most runs ended, most approvals decided).
 * Likewise an approvals listing naming the rare kind (migration 1766200000000): an agent's is always kind=client.
 * (Plans, not timings: the planner's choice on tables of this size is what the indexes decide.)
 */
describe('plans of rare-value lookups over a large ledger', () => {
  let db: ScratchDatabase;
  let ds: DataSource;

  beforeAll(async () => {
    db = await createScratchDatabase('tg_rare_plans');
    ds = await new DataSource(migratorOptions(db.url)).initialize();
    await runMigrations(ds);
    await seed(ds, 60_000, 6_000, () => undefined);
    // Ops reconciled every unknown outcome but five; most runs ended; a backlog of 1,000 approvals is pending, the
    // rest decided (where the pending ones are many, the pass walked the index of every approval in run order).
    await ds.query(
      `UPDATE tool_calls SET status = 'succeeded', error_code = NULL
        WHERE status = 'indeterminate' AND id NOT IN (SELECT id FROM tool_calls WHERE status = 'indeterminate' ORDER BY created_at LIMIT 5)`,
    );
    await ds.query(`UPDATE agent_runs SET status = 'completed' WHERE id NOT IN (SELECT id FROM agent_runs ORDER BY id LIMIT 600)`);
    await ds.query(
      `UPDATE approval_requests SET status = 'approved', decided_role = 'expert', decided_at = now()
        WHERE id NOT IN (SELECT id FROM approval_requests ORDER BY created_at LIMIT 1000)`,
    );
    // Ten runs cancelled over the month: their events among 120,000 per-call ones.
    await ds.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, run_id, metadata, created_at)
       SELECT gen_random_uuid(), r.org_id, 'run.cancelled', r.id, '{}', now() - g * interval '3 days'
         FROM generate_series(1, 10) g CROSS JOIN LATERAL (SELECT id, org_id FROM agent_runs OFFSET g LIMIT 1) r`,
    );
    // Client approvals are rare here: five of the org with most runs, every other one an expert's.
    await ds.query(
      `UPDATE approval_requests SET kind = 'client'
        WHERE id IN (SELECT id FROM approval_requests WHERE org_id = ${orgIdSql('0')} ORDER BY created_at DESC LIMIT 5)`,
    );
    await ds.query('ANALYZE');
  }, 240_000);
  afterAll(async () => {
    await ds?.destroy();
    await db?.drop();
  });

  async function planOf(sql: string, params: unknown[]): Promise<{ plan: PlanNode[]; summary: string }> {
    const plan = await planNodes(ds, sql, params);
    return { plan, summary: planSummary(plan) };
  }
  const seqScans = (plan: PlanNode[], table: string) => plan.filter((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === table);

  it('a platform key listing the reconcile work list (status=indeterminate): the unsettled calls index, no scan of every call', async () => {
    const { sql, params } = toolCallsSizedPageSql(null, { status: 'indeterminate' }, undefined, 51, LIST_PAGE_BYTES);
    const { plan, summary } = await planOf(sql, params);
    expect(plan.some((n) => n['Index Name'] === 'tool_calls_unsettled_idx'), summary).toBe(true);
    expect(seqScans(plan, 'tool_calls'), summary).toEqual([]);
    expect(((await ds.query(sql, params)) as unknown[]).length).toBe(5);
  });

  it('the tool_calls_indeterminate gauges (every 15 s on every replica): the unsettled calls index, no scan of every call', async () => {
    const { plan, summary } = await planOf(INDETERMINATE_GAUGE_SQL, [new Date()]);
    expect(plan.some((n) => n['Index Name'] === 'tool_calls_unsettled_idx'), summary).toBe(true);
    expect(seqScans(plan, 'tool_calls'), summary).toEqual([]);
    const [row] = (await ds.query(INDETERMINATE_GAUGE_SQL, [new Date()])) as { n: number; age: number }[];
    expect(row.n).toBe(5);
    expect(row.age).toBeGreaterThan(0);
  });

  it('a platform key listing a rare event type (run.cancelled): the uncommon types index', async () => {
    const { sql, params } = ledgerEventsSizedPageSql(null, { type: 'run.cancelled' }, undefined, 51, LIST_PAGE_BYTES);
    const { plan, summary } = await planOf(sql, params);
    expect(plan.some((n) => n['Index Name'] === 'ledger_events_uncommon_type_idx'), summary).toBe(true);
    expect(seqScans(plan, 'runtime_ledger_events'), summary).toEqual([]);
    expect(((await ds.query(sql, params)) as unknown[]).length).toBe(10);
  });

  it('the pass finishing ended runs: read off the pending approvals, not every approval ever made', async () => {
    const { plan, summary } = await planOf(ENDED_RUNS_WITH_PENDING_APPROVALS_SQL, []);
    expect(plan.some((n) => n['Index Name'] === 'approval_requests_pending_run_idx'), summary).toBe(true);
    expect(plan.filter((n) => n['Index Name'] === 'approval_requests_run_idx'), summary).toEqual([]);
    expect(seqScans(plan, 'approval_requests'), summary).toEqual([]);
  });

  const KIND_INDEXES = ['approval_requests_org_kind_idx', 'approval_requests_kind_idx'];

  it.each([
    ["an agent listing its org's approvals (kind=client, always)", 'org'],
    ['a platform key listing the client approvals of every org', 'all'],
  ])('%s: read off a kind index in keyset order, not every approval sorted', async (_, scope) => {
    const [{ id }] = (await ds.query(`SELECT ${orgIdSql('0')} AS id`)) as [{ id: string }];
    const total = Number(((await ds.query('SELECT count(*) AS n FROM approval_requests')) as [{ n: string }])[0].n);
    const { sql, params } = approvalsSizedPageSql({ orgId: scope === 'org' ? id : null, kind: 'client' }, undefined, 51, new Date(), LIST_PAGE_BYTES);
    const { plan, summary } = await planOf(sql, params);
    expect(plan.some((n) => KIND_INDEXES.includes(String(n['Index Name']))), summary).toBe(true);
    expect(seqScans(plan, 'approval_requests'), summary).toEqual([]);
    const rows = (await ds.query(sql, params)) as { kind: string; org_id: string }[];
    expect(rows.map((r) => [r.kind, r.org_id])).toEqual(Array.from({ length: 5 }, () => ['client', id]));
    expect(total).toBeGreaterThan(1_000);
  });
});
