import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flagLock, LOCK_SQL, permissionLock } from '../../src/db/advisory-locks.js';
import { approvalFor, refundUse, refunds } from '../approvals/support.js';
import { waitsOnLock } from '../support/lock-waits.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

/**
 * README "What is cached": a revoked key "starts no tool call anywhere once revoked", "decides no approval, and makes
 * no admin change". The guard's fresh look-up of the key is a statement of its own, before the route's transaction;
 * a write that then waits on a lock (its flag row, its approval, another admin's PUT) while its key is revoked must
 * not commit after the revocation answered 204. Each write reads its key FOR SHARE after its waits (holdActorKey; the
 * intent statement once it has read the flag and policy), and the revocation is never the one kept waiting.
 */
describe('a key revoked while its write waits on a lock', () => {
  let h: Harness;
  let holder: pg.Client;

  /** Holds `lock` in a transaction of its own while `write` is sent and seen waiting, revokes `keyId` (204), then ends the transaction. */
  async function revokedWhileWaiting<T>(lock: [string, unknown[]], waitingOn: string, keyId: string, write: () => Promise<T>): Promise<T> {
    await holder.query('BEGIN');
    let pending: Promise<T> | undefined;
    try {
      await holder.query(lock[0], lock[1]);
      pending = write();
      await waitFor(() => waitsOnLock(h.t.ds, waitingOn), `the write waiting on ${waitingOn}`);
      // The revocation is answered at once: it does not wait for the write that waits.
      expect((await h.t.http.delete(`/v1/api-keys/${keyId}`).set(adminAuth)).status).toBe(204);
    } finally {
      await holder.query('ROLLBACK');
    }
    return pending;
  }

  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    holder = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
  });
  afterAll(async () => {
    await holder?.end();
    await h?.close();
  });

  it('a tool call waiting to be recorded (on its flag row) is refused 401, not recorded, not sent', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const agent = await createKey(h.t, org.orgId, 'agent');
    const run = await h.t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: 'support' });
    expect(run.status).toBe(201);
    const lookup = () => h.t.http.post(`/v1/runs/${run.body.id}/tool-calls`).set(bearer(agent.key)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    // The key is now in the cache: the guard lets it in, and the intent statement is the check.
    expect((await lookup()).status).toBe(200);
    const before = h.emu.count({ vendor: 'shopify' });
    const res = await revokedWhileWaiting(
      [`SELECT 1 FROM feature_flags WHERE org_id = $1 AND flag = 'tool_calling_enabled' FOR UPDATE`, [org.orgId]],
      '%INSERT INTO tool_calls%',
      agent.id,
      () => lookup().then((r) => r),
    );
    const [{ n }] = (await h.t.ds.query(`SELECT count(*)::int AS n FROM tool_calls WHERE actor_key_id = $1`, [agent.id])) as [{ n: number }];
    expect({ status: res.status, code: res.body.code, sent: h.emu.count({ vendor: 'shopify' }) - before, recorded: n }).toEqual({
      status: 401,
      code: 'UNAUTHENTICATED',
      sent: 0,
      recorded: 1,
    });
  });

  it('an approval decided by a key revoked while the decision waited for the approval row stays pending; no refund is sent', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('6.10'));
    expect(posted.status).toBe(202);
    const approval = await approvalFor(h, expert.key, posted.body.toolCallId as string);
    const before = refunds(h);
    const res = await revokedWhileWaiting(
      ['SELECT 1 FROM approval_requests WHERE id = $1 FOR UPDATE', [approval.id]],
      '%FROM approval_requests WHERE id = $1 FOR UPDATE%',
      expert.id,
      () =>
        h.t.http
          .post(`/v1/approvals/${approval.id}/decision`)
          .set(bearer(expert.key))
          .send({ decision: 'approve', actionDigest: approval.actionDigest })
          .then((r) => r),
    );
    expect([res.status, res.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    const [row] = (await h.t.ds.query('SELECT status, decided_by FROM approval_requests WHERE id = $1', [approval.id])) as { status: string; decided_by: string | null }[];
    expect(row).toEqual({ status: 'pending', decided_by: null });
    // A live expert decides it still, and the refund goes out once.
    const other = await createKey(h.t, org.orgId, 'expert');
    const ok = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(other.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(ok.status).toBe(200);
    await waitFor(() => refunds(h) - before === 1, 'the approved refund sent');
  });

  // Its wait: another admin's PUT (the flag lock), or calls being recorded (they hold the flag row FOR SHARE): the PUT
  // holds no key lock meanwhile, so the revocation is answered at once, and the PUT is 401.
  it.each([
    ['the flag lock', LOCK_SQL, (org: string) => flagLock(org, 'tool_calling_enabled'), '%pg_advisory_xact_lock%', false],
    ['calls being recorded', `SELECT 1 FROM feature_flags WHERE org_id = $1 AND flag = 'tool_calling_enabled' FOR SHARE`, (org: string) => org, '%INSERT INTO "feature_flags"%', true],
  ] as const)('a flag PUT by an admin key revoked while it waited for %s changes nothing', async (_wait, lockSql, lockParam, waitingOn, flagOn) => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], flag: flagOn });
    const admin = await createKey(h.t, org.orgId, 'admin');
    const res = await revokedWhileWaiting([lockSql, [lockParam(org.orgId)]], waitingOn, admin.id, () =>
      h.t.http
        .put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`)
        .set(bearer(admin.key))
        .send({ enabled: !flagOn })
        .then((r) => r),
    );
    const flags = await h.t.http.get(`/v1/orgs/${org.orgId}/feature-flags`).set(adminAuth);
    expect({ status: res.status, enabled: flags.body.tool_calling_enabled }).toEqual({ status: 401, enabled: flagOn });
    const [{ n }] = (await h.t.ds.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE org_id = $1 AND type = 'feature_flag.changed'`, [org.orgId])) as [
      { n: number },
    ];
    expect(n).toBe(flagOn ? 1 : 0); // setupOrg's own PUT when the flag starts on; none by the revoked key
  });

  it('the lastUsedAt flush skips a key held by a write rather than wait for it, and writes it on a later flush', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const ops = await createKey(h.t, org.orgId, 'ops');
    const admin = await createKey(h.t, org.orgId, 'admin');
    const lastUsed = async (): Promise<Date | null> =>
      ((await h.t.ds.query('SELECT last_used_at FROM api_keys WHERE id = $1', [ops.id])) as { last_used_at: Date | null }[])[0].last_used_at;
    await holder.query('BEGIN');
    try {
      // As a write of the key does from its holdActorKey to its commit (or a call being recorded, from its intent).
      await holder.query('SELECT 1 FROM api_keys WHERE id = $1 FOR SHARE', [ops.id]);
      expect((await h.t.http.get('/v1/tool-calls?limit=1').set(bearer(ops.key))).status).toBe(200); // a use of the key, to flush
      // The listing flushes first (that use among them), and answers.
      const listed = await Promise.race([
        h.t.http.get('/v1/api-keys').set(bearer(admin.key)).then((r) => r.status),
        new Promise((r) => setTimeout(() => r('still waiting'), 5_000)),
      ]);
      expect(listed).toBe(200);
      expect(await lastUsed()).toBeNull();
    } finally {
      await holder.query('ROLLBACK');
    }
    expect((await h.t.http.get('/v1/api-keys').set(bearer(admin.key))).status).toBe(200);
    expect(await lastUsed()).not.toBeNull();
  });

  it('a permissions PUT by an admin key revoked while it waited for the permissions lock changes nothing', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const admin = await createKey(h.t, org.orgId, 'admin');
    const before = await h.t.http.get(`/v1/orgs/${org.orgId}/tool-permissions`).set(adminAuth);
    const res = await revokedWhileWaiting(
      [LOCK_SQL, [permissionLock(org.orgId)]],
      '%pg_advisory_xact_lock%',
      admin.id,
      () =>
        h.t.http
          .put(`/v1/orgs/${org.orgId}/tool-permissions`)
          .set(bearer(admin.key))
          .send({ items: [] })
          .then((r) => r),
    );
    expect(res.status).toBe(401);
    expect((await h.t.http.get(`/v1/orgs/${org.orgId}/tool-permissions`).set(adminAuth)).body).toEqual(before.body);
  });

  it('two admin keys revoking each other at once: one revocation stands, the other key is refused 401, never a 500', async () => {
    for (let round = 0; round < 5; round++) {
      const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
      const [a, b] = [await createKey(h.t, org.orgId, 'admin'), await createKey(h.t, org.orgId, 'admin')];
      const answers = await Promise.all([
        h.t.http.delete(`/v1/api-keys/${b.id}`).set(bearer(a.key)),
        h.t.http.delete(`/v1/api-keys/${a.id}`).set(bearer(b.key)),
      ]);
      expect(answers.map((r) => r.status).sort()).toEqual([204, 401]);
      const revoked = (await h.t.ds.query('SELECT id FROM api_keys WHERE id = ANY($1::uuid[]) AND revoked_at IS NOT NULL', [[a.id, b.id]])) as unknown[];
      expect(revoked).toHaveLength(1);
    }
  });
});
