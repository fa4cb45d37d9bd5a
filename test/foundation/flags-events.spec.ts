import { createHash } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import type { SealFrontier } from '../../src/ledger/seal-frontier.js';
import { LedgerVerifierService } from '../../src/ledger/ledger-verifier.service.js';
import { FeatureFlagsService } from '../../src/orgs/feature-flags.service.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

describe('feature flags and the append-only event ledger', () => {
  let t: TestApp;
  let org: string;

  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Flags Inc');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('defaults tool_calling_enabled to false and flips it with an event', async () => {
    const before = await t.http.get(`/v1/orgs/${org}/feature-flags`).set(adminAuth);
    expect(before.status).toBe(200);
    expect(before.body).toEqual({ tool_calling_enabled: false });

    const admin = await createKey(t, org, 'admin');
    const put = await t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(bearer(admin.key)).send({ enabled: true, reason: 'pilot' });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ flag: 'tool_calling_enabled', enabled: true, updatedBy: admin.id });
    expect((await t.http.get(`/v1/orgs/${org}/feature-flags`).set(adminAuth)).body).toEqual({ tool_calling_enabled: true });

    const events = (await t.ds.query(
      `SELECT actor, metadata FROM runtime_ledger_events WHERE org_id = $1 AND type = 'feature_flag.changed' ORDER BY seq`,
      [org],
    )) as { actor: { keyId: string; role: string }; metadata: { flag: string; from: boolean; to: boolean } }[];
    expect(events).toHaveLength(1);
    expect(events[0].actor).toEqual({ keyId: admin.id, role: 'admin', correlationId: put.headers['x-correlation-id'] }); // the PUT's
    expect(events[0].metadata).toMatchObject({ flag: 'tool_calling_enabled', from: false, to: true });
  });

  it('feature_flag.changed keeps the SHA-256 of the reason (reasonDigest), which the next change does not overwrite; none given: null', async () => {
    const own = await createOrg(t, 'Flags Reason Co');
    const admin = await createKey(t, own, 'admin');
    const flag = `/v1/orgs/${own}/feature-flags/tool_calling_enabled`;
    const reason = 'pilot approved in CAB ticket 4711 (Jürgen)';
    expect((await t.http.put(flag).set(bearer(admin.key)).send({ enabled: true, reason })).status).toBe(200);
    expect((await t.http.put(flag).set(bearer(admin.key)).send({ enabled: false, reason: 'pilot over' })).status).toBe(200);
    expect((await t.http.put(flag).set(bearer(admin.key)).send({ enabled: false })).status).toBe(200);
    expect((await t.http.put(flag).set(bearer(admin.key)).send({ enabled: false, reason: '' })).status).toBe(200);
    const events = (await t.ds.query(`SELECT metadata FROM runtime_ledger_events WHERE org_id = $1 AND type = 'feature_flag.changed' ORDER BY seq`, [own])) as {
      metadata: Record<string, unknown>;
    }[];
    const sha = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
    expect(events.map((e) => e.metadata)).toEqual([
      { flag: 'tool_calling_enabled', from: false, to: true, reasonGiven: true, reasonDigest: sha(reason) },
      { flag: 'tool_calling_enabled', from: true, to: false, reasonGiven: true, reasonDigest: sha('pilot over') },
      { flag: 'tool_calling_enabled', from: false, to: false, reasonDigest: null },
      { flag: 'tool_calling_enabled', from: false, to: false, reasonDigest: null },
    ]);
    // A digest, not the text: a reason may name people, and the ledger is never erased.
    expect(JSON.stringify(events)).not.toContain('CAB ticket');
  });

  it('the admin GET reads the database: a change made on another replica shows at once, whatever this replica cached', async () => {
    const other = await createOrg(t, 'Flags Elsewhere');
    expect((await t.http.get(`/v1/orgs/${other}/feature-flags`).set(adminAuth)).body).toEqual({ tool_calling_enabled: false });
    const flags = t.app.get(FeatureFlagsService, { strict: false });
    expect(await flags.isEnabled(other, 'tool_calling_enabled')).toBe(false); // the hot path's cache holds false now
    // Set on another replica: the row only, this replica's cache is not told.
    await t.ds.query(
      `INSERT INTO feature_flags (org_id, flag, enabled, updated_at) VALUES ($1, 'tool_calling_enabled', true, now())
       ON CONFLICT (org_id, flag) DO UPDATE SET enabled = true`,
      [other],
    );
    expect((await t.http.get(`/v1/orgs/${other}/feature-flags`).set(adminAuth)).body).toEqual({ tool_calling_enabled: true });
  });

  it('refuses ops changing a flag (403) and unknown flags (404)', async () => {
    const ops = await createKey(t, org, 'ops');
    const res = await t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(bearer(ops.key)).send({ enabled: false });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('FORBIDDEN');
    const unknown = await t.http.put(`/v1/orgs/${org}/feature-flags/not_a_flag`).set(adminAuth).send({ enabled: true });
    expect(unknown.status).toBe(404);
    const badBody = await t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: 'yes' });
    expect(badBody.status).toBe(400);
    expect(badBody.body.detail).toContain('enabled');
  });

  it('refuses UPDATE, DELETE and TRUNCATE at the database', async () => {
    await t.app.get(LedgerEventsService).append([{ orgId: org, type: 'test.event', metadata: { n: 1 } }]);
    await expect(t.ds.query(`UPDATE runtime_ledger_events SET metadata = '{"n":2}' WHERE org_id = $1`, [org])).rejects.toThrow(/append-only/);
    await expect(t.ds.query(`UPDATE runtime_ledger_events SET type = 'x' WHERE org_id = $1`, [org])).rejects.toThrow(/append-only/);
    await expect(t.ds.query(`DELETE FROM runtime_ledger_events WHERE org_id = $1`, [org])).rejects.toThrow(/append-only/);
    await expect(t.ds.query(`TRUNCATE runtime_ledger_events`)).rejects.toThrow(/append-only/);
    // Once sealed, even the seal cannot be rewritten.
    await t.app.get(LedgerVerifierService).verify(org);
    await expect(t.ds.query(`UPDATE runtime_ledger_events SET hash = 'f' WHERE org_id = $1`, [org])).rejects.toThrow(/append-only/);
  });

  it('chains 50 concurrent appends for one org into one unbroken chain', async () => {
    const chainOrg = await createOrg(t, 'Chain');
    const events = t.app.get(LedgerEventsService);
    await Promise.all(Array.from({ length: 50 }, (_, i) => events.append([{ orgId: chainOrg, type: 'test.concurrent', metadata: { i } }])));
    const result = await t.app.get(LedgerVerifierService).verify(chainOrg);
    expect(result.ok).toBe(true);
    expect(result.checked).toBe(51); // org.created + 50
    const rows = (await t.ds.query(
      `SELECT chain_seq, prev_hash, hash FROM runtime_ledger_events WHERE org_id = $1 ORDER BY chain_seq`,
      [chainOrg],
    )) as { chain_seq: string; prev_hash: string; hash: string }[];
    expect(rows.map((r) => Number(r.chain_seq))).toEqual(Array.from({ length: 51 }, (_, i) => i + 1));
    for (let i = 1; i < rows.length; i++) expect(rows[i].prev_hash).toBe(rows[i - 1].hash);
    expect(new Set(rows.map((r) => r.hash)).size).toBe(51);
  });

  it('continues several orgs’ chains from their own heads when their events share a sealing pass', async () => {
    const events = t.app.get(LedgerEventsService);
    const verifier = t.app.get(LedgerVerifierService);
    const a = await createOrg(t, 'Heads A');
    const b = await createOrg(t, 'Heads B');
    await verifier.verify(a); // seals both orgs' first events: each now has a head
    const fresh = await createOrg(t, 'Heads C'); // no head yet: starts at genesis in the same pass
    await events.append([
      { orgId: a, type: 'test.interleaved', metadata: { i: 1 } },
      { orgId: b, type: 'test.interleaved', metadata: { i: 1 } },
      { orgId: a, type: 'test.interleaved', metadata: { i: 2 } },
      { orgId: fresh, type: 'test.interleaved', metadata: { i: 1 } },
      { orgId: b, type: 'test.interleaved', metadata: { i: 2 } },
    ]);
    for (const [org, n] of [[a, 3], [b, 3], [fresh, 2]] as const) {
      const result = await verifier.verify(org);
      expect(result).toMatchObject({ ok: true, checked: n });
      const seqs = (await t.ds.query(`SELECT chain_seq FROM runtime_ledger_events WHERE org_id = $1 ORDER BY chain_seq`, [org])) as { chain_seq: string }[];
      expect(seqs.map((r) => Number(r.chain_seq))).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    }
  });

  it('seals an event that committed after later events were sealed (a gap below the frontier) on a periodic pass', async () => {
    const gapOrg = await createOrg(t, 'Gap');
    const su = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await su.connect();
    try {
      await su.query('BEGIN');
      const [{ seq }] = (await su.query(`INSERT INTO runtime_ledger_events (id, org_id, type) VALUES (gen_random_uuid(), $1, 'test.straggler') RETURNING seq`, [gapOrg]))
        .rows as { seq: string }[];
      await t.app.get(LedgerEventsService).append([{ orgId: gapOrg, type: 'test.after' }]);
      const sealer = t.app.get(LedgerSealerService) as unknown as { frontier: SealFrontier };
      await waitFor(() => sealer.frontier.openGaps().includes(Number(seq)), 'the straggler recorded as a gap', 5_000, 50);
      await su.query('COMMIT');
      await waitFor(async () => {
        const [{ n }] = (await t.ds.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE org_id = $1 AND hash IS NULL`, [gapOrg])) as [{ n: number }];
        return n === 0;
      }, 'every event of the org sealed', 5_000, 50);
      expect(sealer.frontier.openGaps()).not.toContain(Number(seq));
      expect(await t.app.get(LedgerVerifierService).verify(gapOrg)).toMatchObject({ ok: true, checked: 3 });
    } finally {
      await su.end();
    }
  });

  it('seals events shortly after commit without being asked', async () => {
    const sealOrg = await createOrg(t, 'Seal');
    const deadline = Date.now() + 5_000;
    let unsealed = 1;
    while (Date.now() < deadline && unsealed > 0) {
      await new Promise((r) => setTimeout(r, 100));
      [{ unsealed }] = (await t.ds.query(`SELECT count(*)::int AS unsealed FROM runtime_ledger_events WHERE org_id = $1 AND hash IS NULL`, [sealOrg])) as [
        { unsealed: number },
      ];
    }
    expect(unsealed).toBe(0);
  });
});
