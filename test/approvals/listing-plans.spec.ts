import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer, createKey, createOrg } from '../support/test-app.js';
import { planNodes, planSummary, type PlanNode } from '../support/query-plan.js';
import { aroundStatements } from './support.js';


/**
 * GET /v1/approvals pages newest first by (created_at, id). With only the (org_id, status, created_at, id) index, a
 * page with no status, with a kind or a runId (no index at all), or a platform key's page over every org read every
 * matching approval and sorted them, on every page: an org with 85,000 decided approvals took 313 ms for one row,
 * linear in its history. Every such page must be an index read in the listing's order: no Sort, no Seq Scan.
 * (Plans, not timings: the planner's choice on a table of this size is what the migration's indexes decide.)
 */
describe('approvals listing plans over a long approval history', () => {
  const HISTORY = 30_000;
  let h: Harness;
  let org: OrgSetup;
  let expertKey: string;
  let other: string;

  /** The listing statement `path` sends, and its plan. */
  async function planOf(path: string, auth: Record<string, string>): Promise<{ sql: string; plan: PlanNode[] }> {
    const seen: { text: string; params: unknown[] }[] = [];
    const undo = aroundStatements(h.t.app.get(Sql), (text, params, send) => {
      // The listing's statement by its page-size cut: the app's own sweeps (expiry, approved-call runner) also read
      // approval_requests in order and may run during the request.
      if (text.includes('FROM approval_requests') && text.includes('octet_length(input_redacted::text)')) seen.push({ text, params });
      return send();
    });
    try {
      const res = await h.t.http.get(path).set(auth);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.items).toHaveLength(1);
    } finally {
      undo();
    }
    expect(seen, path).toHaveLength(1);
    const [{ text, params }] = seen;
    return { sql: text, plan: await planNodes(h.t.ds, text, params) };
  }

  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    expertKey = (await createKey(h.t, org.orgId, 'expert')).key;
    other = await createOrg(h.t, 'Other');
    // A year of decided approvals (one in ten on the org's run), and as many of other orgs'.
    await h.t.ds.query(
      `INSERT INTO approval_requests (id, org_id, tool_call_id, run_id, kind, status, tool_name, action, input_redacted, risk_level, reason,
                                      action_digest, created_at, expires_at, decided_role, decided_at)
       SELECT gen_random_uuid(), CASE WHEN g % 2 = 0 THEN $1::uuid ELSE $4::uuid END, gen_random_uuid(),
              CASE WHEN g % 20 = 0 THEN $2::uuid ELSE gen_random_uuid() END,
              CASE WHEN g % 5 = 0 THEN 'client' ELSE 'expert' END, CASE WHEN g % 20 = 1 THEN 'rejected' ELSE 'approved' END,
              'shopify_refund', 'create', jsonb_build_object('orderId', g::text, 'amount', '1.00'), 'high', 'refund',
              md5(g::text) || md5(g::text), now() - interval '365 days' + g * interval '17 minutes', now() - interval '364 days' + g * interval '17 minutes',
              'expert', now() - interval '365 days' + g * interval '17 minutes'
         FROM generate_series(1, $3::int) g`,
      [org.orgId, org.runId, HISTORY, other],
    );
    await h.t.ds.query('ANALYZE approval_requests');
  }, 120_000);
  afterAll(async () => {
    // Kept, the history would slow later files' approvals on the shared test database.
    await h?.t.ds.query('DELETE FROM approval_requests WHERE org_id = ANY($1::uuid[])', [[org.orgId, other]]);
    await h?.close();
  });

  it.each([
    ['the org, no filter', '/v1/approvals?limit=1', 'expert'],
    ['the org, kind=expert', '/v1/approvals?limit=1&kind=expert', 'expert'],
    ['the org, runId', '/v1/approvals?limit=1&runId=:run', 'expert'],
    ['the org, status=approved', '/v1/approvals?limit=1&status=approved', 'expert'],
    ['every org (platform key), no filter', '/v1/approvals?limit=1', 'platform'],
    ['every org (platform key), runId', '/v1/approvals?limit=1&runId=:run', 'platform'],
  ] as const)('%s: an index read in the listing order', async (_name, path, who) => {
    const { sql, plan } = await planOf(path.replace(':run', org.runId), who === 'platform' ? adminAuth : bearer(expertKey));
    const summary = planSummary(plan);
    expect(plan.filter((n) => n['Node Type'] === 'Sort' || n['Node Type'] === 'Incremental Sort' || (n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'approval_requests')), `${sql}\n${summary}`).toEqual([]);
    expect(plan.some((n) => n['Index Name']?.startsWith('approval_requests_')), summary).toBe(true);
  });
});
