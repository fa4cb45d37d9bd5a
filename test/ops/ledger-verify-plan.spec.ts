import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { verifyOrgChain } from '../../src/ledger/ledger-verifier.service.js';
import { planNodes } from '../support/query-plan.js';
import { bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Verify reads one org's events, not the ledger's: every statement it runs must
 * reach the org's rows through the org's indexes. (Its off-chain check once
 * walked the primary key in seq order, filtering on org_id, because the planner
 * could not estimate `(chain_seq IS NULL) <> (hash IS NULL)`: on an intact
 * ledger it read every org's events, on every verify.)
 */
describe('ledger verify query plans', () => {
  let t: TestApp;
  let org: string;
  const OWN = 200;
  const OTHER_ORGS = Array.from({ length: 3_000 }, () => randomUUID());

  beforeAll(async () => {
    t = await startTestApp({ LEDGER_SEAL_INTERVAL_MS: '60000' });
    org = await createOrg(t, 'Planned');
    await t.app.get(LedgerEventsService).append(Array.from({ length: OWN }, (_, i) => ({ orgId: org, type: 'test.step', metadata: { i } })));
    await t.app.get(LedgerSealerService).sealNow();
    // Other orgs' sealed-looking events, interleaved, many times the org's own.
    const others = Array.from({ length: 40 }, () => randomUUID());
    await t.ds.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, metadata, chain_seq, prev_hash, hash, sealed_at)
       SELECT gen_random_uuid(), ($1::uuid[])[1 + (g % 40)], 'bench', jsonb_build_object('g', g), 1 + g / 40, md5(g::text), md5((g + 1)::text), now()
         FROM generate_series(0, 39999) g`,
      [others],
    );
    await t.app.get(LedgerEventsService).append([{ orgId: org, type: 'test.step', metadata: { last: true } }]);
    await t.app.get(LedgerSealerService).sealNow();
    // Other orgs' settings verify compares with the ledger (policy, flag, permission, keys), many times the org's own:
    // a statement reading them all is seen, whatever the files before this one left in the database.
    await t.ds.query(`INSERT INTO orgs (id, name) SELECT unnest($1::uuid[]), 'verify-plan other'`, [OTHER_ORGS]);
    await t.ds.query(`INSERT INTO policies (org_id, rules) SELECT unnest($1::uuid[]), '[]'`, [OTHER_ORGS]);
    await t.ds.query(`INSERT INTO feature_flags (org_id, flag, enabled) SELECT unnest($1::uuid[]), 'tool_calling_enabled', true`, [OTHER_ORGS]);
    await t.ds.query(`INSERT INTO tool_permissions (id, org_id, tool_name, action, enabled) SELECT gen_random_uuid(), unnest($1::uuid[]), 'order_lookup', 'lookup', true`, [OTHER_ORGS]);
    await t.ds.query(
      `INSERT INTO api_keys (id, org_id, role, name, key_hash, key_prefix)
       SELECT gen_random_uuid(), o, 'agent', 'k', uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()), 'tgw_plan'
         FROM unnest($1::uuid[]) o, generate_series(1, 2)`,
      [OTHER_ORGS],
    );
    // Runs (verify holds each of the org's to its run events, src/ledger/run-check.ts): the org's own, made through the
    // API, and one of each other org's, with its run.created event, many times the org's own.
    const agent = await createKey(t, org, 'agent');
    const run = await t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: 'support' });
    expect(run.status, JSON.stringify(run.body)).toBe(201);
    await t.ds.query(
      `WITH r AS (INSERT INTO agent_runs (id, org_id, specialist_id, status, metadata)
                  SELECT gen_random_uuid(), o, 'support', 'running', '{"runtimeManifest": {"allowedTools": []}}' FROM unnest($1::uuid[]) o RETURNING id, org_id)
       INSERT INTO runtime_ledger_events (id, org_id, type, run_id, metadata)
       SELECT gen_random_uuid(), org_id, 'run.created', id, '{"specialistId": "support", "allowedToolCount": 0}' FROM r`,
      [OTHER_ORGS],
    );
    await t.app.get(LedgerSealerService).sealNow();
    await t.ds.query('ANALYZE runtime_ledger_events, orgs, policies, feature_flags, tool_permissions, api_keys, agent_runs');
  }, 60_000);
  afterAll(async () => {
    // The other orgs' rows go (the files after this one on the same database list orgs and keys); their events stay, as
    // the ledger keeps every event.
    if (t) {
      for (const table of ['agent_runs', 'api_keys', 'tool_permissions', 'feature_flags', 'policies']) await t.ds.query(`DELETE FROM ${table} WHERE org_id = ANY($1::uuid[])`, [OTHER_ORGS]);
      await t.ds.query('DELETE FROM orgs WHERE id = ANY($1::uuid[])', [OTHER_ORGS]);
    }
    await t?.close();
  });

  it('every statement verify runs reads the org’s events through its indexes, never the whole ledger', async () => {
    const statements: { sql: string; params: unknown[] }[] = [];
    const result = await verifyOrgChain(
      { query: (sql, params) => (statements.push({ sql, params }), t.ds.query(sql, params)) },
      org,
    );
    const [{ events }] = (await t.ds.query('SELECT count(*)::int AS events FROM runtime_ledger_events WHERE org_id = $1', [org])) as [{ events: number }];
    expect(result).toMatchObject({ ok: true, checked: events });
    expect(events).toBeGreaterThan(OWN + 2);
    expect(statements.length).toBeGreaterThanOrEqual(2);
    for (const { sql, params } of statements) {
      const all = await planNodes(t.ds, sql, params, { analyze: true });
      const scans = all.filter((n) => n['Relation Name'] || n['Index Name']);
      const summary = scans.map((n) => `${n['Node Type']} ${n['Relation Name'] ?? ''} ${n['Index Name'] ?? ''}`).join(', ');
      expect(scans.length, sql).toBeGreaterThan(0);
      // Scans that ran. One that never did read nothing for this org: the tool-call statement's subplans over
      // approval_requests and policy_decisions run once per call, and the org has none; on a database where earlier files
      // left those tables nearly empty the planner costs a seq scan of them lower (it did, once, in CI), which says
      // nothing of an org with calls (ledger-verify-trail.spec.ts times verify's per-call reads for one).
      const ran = scans.filter((n) => n['Actual Loops'] !== 0);
      expect(ran.filter((n) => n['Node Type'] === 'Seq Scan' || n['Index Name'] === 'runtime_ledger_events_pkey'), `${sql}\n${summary}`).toEqual([]);
      const discarded = all.reduce((s, n) => s + (n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Index Recheck'] ?? 0), 0);
      expect(discarded, `${sql}\n${summary}`).toBeLessThan(OWN);
    }
  }, 30_000);
});
