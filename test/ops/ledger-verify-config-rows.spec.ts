import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NIL_UUID } from '../../src/common/ids.js';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { verifyOrgChain, type VerifyResult } from '../../src/ledger/ledger-verifier.service.js';
import { ledgerVerifyCommand } from '../../src/ops/ledger-verify.command.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Verify holds an org's governance rows to the events that recorded them (src/ledger/config-check.ts): the gateway
 * acts on the feature_flags, tool_permissions, policies and api_keys rows, which are not chained, so tool calling
 * switched on, a write action enabled, a rule weakened or a revoked key brought back by an UPDATE with no event left
 * every chain intact and verify ok. Each test tampers with its own org only (the database is shared); the platform
 * chain's case runs in a transaction rolled back.
 */
describe('ledger verify: feature flags, permissions, policy and API keys against their events', () => {
  let t: TestApp;
  let su: pg.Client;

  beforeAll(async () => {
    t = await startTestApp();
    su = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await su.connect();
  });
  afterAll(async () => {
    await su?.end();
    await t?.close();
  });

  const verify = async (orgId: string): Promise<VerifyResult> => {
    const res = await t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as VerifyResult;
  };
  const broken = async (orgId: string, reason: RegExp): Promise<void> => {
    const result = await verify(orgId);
    expect(result.ok, JSON.stringify(result)).toBe(false);
    if (!result.ok) expect(result.brokenAt.reason).toMatch(reason);
  };

  /** An org an admin configured through the API: flags with reasons, permissions, a policy, keys made and revoked. */
  async function configuredOrg(name: string) {
    const org = await createOrg(t, name);
    const admin = await createKey(t, org, 'admin');
    const agent = await createKey(t, org, 'agent');
    const revoked = await createKey(t, org, 'ops');
    const as = bearer(admin.key);
    const ok = (res: { status: number; body: unknown }) => expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
    ok(await t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(as).send({ enabled: true, reason: 'pilot' }));
    ok(await t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(as).send({ enabled: false, reason: 'pilot over' }));
    const items = [
      { toolName: 'shopify_refund', action: 'create', specialistId: null, enabled: false },
      { toolName: 'order_lookup', action: 'lookup', specialistId: 'support', enabled: true },
    ];
    ok(await t.http.put(`/v1/orgs/${org}/tool-permissions`).set(as).send({ items }));
    ok(await t.http.put(`/v1/orgs/${org}/tool-permissions`).set(as).send({ items: [items[0]] }));
    const rule = { id: 'big-refunds', match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'gt', value: 100 }] }, decision: 'require_expert_approval', reason: 'over 100' };
    ok(await t.http.put(`/v1/orgs/${org}/policies`).set(as).send({ rules: [rule] }));
    ok(await t.http.delete(`/v1/api-keys/${revoked.id}`).set(adminAuth));
    expect(await verify(org)).toMatchObject({ ok: true });
    return { org, admin, agent, revoked };
  }

  it('an org configured through the API verifies intact, over the API and the CLI', async () => {
    const { org } = await configuredOrg('Config Intact Co');
    const out: string[] = [];
    const err: string[] = [];
    const code = await ledgerVerifyCommand(['--org', org], { DATABASE_URL: process.env.DATABASE_URL }, { out: (l) => out.push(l), err: (l) => err.push(l) });
    expect(code, err.join('\n')).toBe(0);
    expect(JSON.parse(out[0]!)).toMatchObject({ ok: true });
  });

  it('feature flags: a value or reason its last feature_flag.changed did not set, or a row no event set, is a break', async () => {
    const { org } = await configuredOrg('Config Flag Co');
    await t.ds.query(`UPDATE feature_flags SET enabled = true WHERE org_id = $1`, [org]);
    await broken(org, /feature flag tool_calling_enabled is true in the database, but its last feature_flag.changed event on the ledger set it false/);
    await t.ds.query(`UPDATE feature_flags SET enabled = false, reason = 'pilot extended' WHERE org_id = $1`, [org]);
    await broken(org, /reason stored with feature flag tool_calling_enabled is not the one its last feature_flag.changed event recorded/);
    await t.ds.query(`UPDATE feature_flags SET reason = 'pilot over' WHERE org_id = $1`, [org]);
    expect(await verify(org)).toMatchObject({ ok: true });
    // Set on an org whose flag no event ever set: it reads true, the ledger says the default.
    const fresh = await createOrg(t, 'Config Flag Fresh Co');
    await t.ds.query(`INSERT INTO feature_flags (org_id, flag, enabled) VALUES ($1, 'tool_calling_enabled', true)`, [fresh]);
    const result = await verify(fresh);
    expect(result).toMatchObject({ ok: false, brokenAt: { chainSeq: 0, eventId: null, reason: expect.stringMatching(/no feature_flag.changed event on the ledger set it/) } });
  });

  it('tool permissions: a row flipped, added or deleted around the gateway is a break; none recorded, none may be stored', async () => {
    const { org } = await configuredOrg('Config Perm Co');
    const reason = /tool permission rows are not the set its last tool_permissions.changed event on the ledger recorded \(setTag\)/;
    await t.ds.query(`UPDATE tool_permissions SET enabled = true WHERE org_id = $1`, [org]);
    await broken(org, reason);
    await t.ds.query(`UPDATE tool_permissions SET enabled = false WHERE org_id = $1`, [org]);
    expect(await verify(org)).toMatchObject({ ok: true });
    await t.ds.query(`INSERT INTO tool_permissions (id, org_id, tool_name, action, specialist_id, enabled) VALUES ($1, $2, 'shopify_refund', 'create', 'sneaky', true)`, [randomUUID(), org]);
    await broken(org, reason);
    await t.ds.query(`DELETE FROM tool_permissions WHERE org_id = $1`, [org]);
    await broken(org, reason);
    const fresh = await createOrg(t, 'Config Perm Fresh Co');
    await t.ds.query(`INSERT INTO tool_permissions (id, org_id, tool_name, action, specialist_id, enabled) VALUES ($1, $2, 'shopify_refund', 'create', NULL, true)`, [randomUUID(), fresh]);
    await broken(fresh, /tool permission rows are stored, but no tool_permissions.changed event on the ledger recorded any/);
  });

  it('tool permissions under an event from before setTag: held to its count and enabled', async () => {
    const org = await createOrg(t, 'Config Perm Legacy Co');
    await t.ds.query(`INSERT INTO tool_permissions (id, org_id, tool_name, action, specialist_id, enabled) VALUES ($1, $2, 'shopify_refund', 'create', NULL, false)`, [randomUUID(), org]);
    await t.app.get(LedgerEventsService).append([{ orgId: org, type: 'tool_permissions.changed', metadata: { count: 1, enabled: 0 } }]);
    expect(await verify(org)).toMatchObject({ ok: true });
    await t.ds.query(`UPDATE tool_permissions SET enabled = true WHERE org_id = $1`, [org]);
    await broken(org, /\(count or enabled\)/);
  });

  it('policy: rules, version or the row itself changed around the gateway is a break', async () => {
    const { org } = await configuredOrg('Config Policy Co');
    const [{ rules }] = (await t.ds.query(`SELECT rules FROM policies WHERE org_id = $1`, [org])) as [{ rules: unknown }];
    // The rule weakened to allow, the version kept: the gateway would allow every refund over 100.
    await t.ds.query(`UPDATE policies SET rules = jsonb_set(rules, '{0,decision}', '"allow"') WHERE org_id = $1`, [org]);
    expect((await t.http.get(`/v1/orgs/${org}/policies`).set(adminAuth)).body.rules[0].decision).toBe('allow');
    await broken(org, /stored policy rules are not the ones its last policy.changed event on the ledger recorded \(rulesDigest\)/);
    await t.ds.query(`UPDATE policies SET rules = $2::jsonb WHERE org_id = $1`, [org, JSON.stringify(rules)]);
    expect(await verify(org)).toMatchObject({ ok: true });
    await t.ds.query(`UPDATE policies SET version = version + 1 WHERE org_id = $1`, [org]);
    await broken(org, /not the version its last policy.changed event/);
    await t.ds.query(`DELETE FROM policies WHERE org_id = $1`, [org]);
    await broken(org, /no policy stored, but its last policy.changed event on the ledger stored one/);
    const fresh = await createOrg(t, 'Config Policy Fresh Co');
    await t.ds.query(`INSERT INTO policies (org_id, rules) VALUES ($1, '[]'::jsonb)`, [fresh]);
    await broken(fresh, /a policy is stored, but no policy.changed event on the ledger recorded one/);
  });

  it('API keys: revoked one brought back, role raised, key inserted or revoked with no event: each a break at the event it contradicts', async () => {
    const { org, agent, revoked } = await configuredOrg('Config Keys Co');
    const [revokedEvent] = (await t.ds.query(
      `SELECT id FROM runtime_ledger_events WHERE org_id = $1 AND type = 'api_key.revoked' AND metadata->>'apiKeyId' = $2`,
      [org, revoked.id],
    )) as [{ id: string }];
    await t.ds.query(`UPDATE api_keys SET revoked_at = NULL WHERE id = $1`, [revoked.id]);
    const back = await verify(org);
    expect(back).toMatchObject({ ok: false, brokenAt: { eventId: revokedEvent.id, reason: expect.stringMatching(/API key is live, but an api_key.revoked event on the ledger revoked it/) } });
    await t.ds.query(`UPDATE api_keys SET revoked_at = now() WHERE id = $1`, [revoked.id]);
    expect(await verify(org)).toMatchObject({ ok: true });

    await t.ds.query(`UPDATE api_keys SET role = 'admin' WHERE id = $1`, [agent.id]);
    await broken(org, /role is not the one its api_key.created event on the ledger recorded/);
    await t.ds.query(`UPDATE api_keys SET role = 'agent' WHERE id = $1`, [agent.id]);
    await t.ds.query(`UPDATE api_keys SET revoked_at = now() WHERE id = $1`, [agent.id]);
    await broken(org, /API key is revoked, but no api_key.revoked event on the ledger recorded it/);
    await t.ds.query(`UPDATE api_keys SET revoked_at = NULL WHERE id = $1`, [agent.id]);
    expect(await verify(org)).toMatchObject({ ok: true });

    const forged = randomUUID();
    await t.ds.query(
      `INSERT INTO api_keys (id, org_id, role, name, key_hash, key_prefix) VALUES ($1, $2, 'admin', 'forged', decode(md5(random()::text) || md5(random()::text), 'hex'), 'tgw_forg')`,
      [forged, org],
    );
    await broken(org, /API key is stored that no api_key.created event on the ledger recorded/);
    // Moved to another org instead: missing here, unrecorded there.
    const other = await createOrg(t, 'Config Keys Other Co');
    await t.ds.query(`UPDATE api_keys SET org_id = $2 WHERE id = $1`, [forged, other]);
    await broken(other, /API key is stored that no api_key.created event/);
    await t.ds.query(`UPDATE api_keys SET org_id = $2 WHERE id = $1`, [agent.id, other]);
    await broken(org, /API key an event on the ledger recorded is missing from the database/);
  });

  it('platform keys are held to the platform chain (a platform admin key inserted around the gateway is a break)', async () => {
    const db = { query: async (sql: string, params: unknown[]) => (await su.query(sql, params)).rows as unknown };
    await su.query('BEGIN');
    try {
      const before = await verifyOrgChain(db, NIL_UUID);
      expect(before, JSON.stringify(before)).toMatchObject({ ok: true });
      await su.query(
        `INSERT INTO api_keys (id, org_id, role, name, key_hash, key_prefix) VALUES ($1, NULL, 'admin', 'forged platform', decode(md5(random()::text) || md5(random()::text), 'hex'), 'tgw_forg')`,
        [randomUUID()],
      );
      const after = await verifyOrgChain(db, NIL_UUID);
      expect(after).toMatchObject({ ok: false, brokenAt: { chainSeq: 0, eventId: null, reason: expect.stringMatching(/no api_key.created event/) } });
    } finally {
      await su.query('ROLLBACK'); // the platform chain is shared with every other file
    }
  });
});
