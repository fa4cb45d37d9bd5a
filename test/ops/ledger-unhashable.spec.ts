import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { ledgerVerifyCommand } from '../../src/ops/ledger-verify.command.js';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * jsonb keeps numbers past the double range (`1e400`); JSON.parse reads them as
 * Infinity, which has no canonical JSON form, so such an event cannot be hashed.
 * The gateway never writes one: these rows come from writes around it.
 */
describe('ledger events that cannot be hashed', () => {
  let t: TestApp;
  /** A superuser connection, as an attacker (or a careless tool) with database access would have. */
  let su: pg.Client;
  const POISON = `'{"n": 1e400}'::jsonb`;
  const poisoned: string[] = [];

  async function asSuperuser(sql: string, params: unknown[]): Promise<pg.QueryResult> {
    await su.query('BEGIN');
    await su.query('SET LOCAL session_replication_role = replica'); // bypasses the append-only trigger
    const res = await su.query(sql, params);
    await su.query('COMMIT');
    return res;
  }

  const append = (orgId: string, type: string, n = 1) =>
    t.app.get(LedgerEventsService).append(Array.from({ length: n }, (_, i) => ({ orgId, type, metadata: { i } })));
  const sealNow = () => t.app.get(LedgerSealerService).sealNow();
  const verify = async (orgId: string) => {
    const res = await t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth);
    return { status: res.status, body: res.body as Record<string, unknown> };
  };
  const cli = async (orgId: string) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await ledgerVerifyCommand(['--org', orgId], { DATABASE_URL: process.env.DATABASE_URL }, { out: (l) => out.push(l), err: (l) => err.push(l) });
    return { code, out, err };
  };
  const unsealed = async (orgId: string, type: string) =>
    ((await t.ds.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE org_id = $1 AND type = $2 AND hash IS NULL`, [orgId, type])) as { n: number }[])[0].n;
  const stoppedGauge = async () => Number(/^ledger_chains_stopped (\S+)$/m.exec((await t.http.get('/metrics')).text)?.[1]);

  beforeAll(async () => {
    t = await startTestApp({ LEDGER_SEAL_INTERVAL_MS: '60000' });
    su = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await su.connect();
  });
  afterAll(async () => {
    // The database is shared with the rest of the run: leave no event that stops a chain.
    await asSuperuser(`DELETE FROM runtime_ledger_events WHERE id = ANY($1::uuid[])`, [poisoned]).catch(() => undefined);
    await su?.end();
    await t?.close();
  });

  it('a sealed event tampered to hold such a number is a break at its position (API 200, CLI exit 1), not a 500', async () => {
    const org = await createOrg(t, 'Poison sealed');
    await append(org, 'test.step', 3);
    await sealNow();
    const [{ id }] = (
      await asSuperuser(`UPDATE runtime_ledger_events SET metadata = ${POISON} WHERE org_id = $1 AND chain_seq = 3 RETURNING id`, [org])
    ).rows as { id: string }[];
    poisoned.push(id);
    const res = await verify(org);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ ok: false, checked: 2, brokenAt: { chainSeq: 3, eventId: id, reason: expect.stringMatching(/cannot be hashed/) } });
    const run = await cli(org);
    expect(run.code, run.err.join('\n')).toBe(1);
    expect(JSON.parse(run.out[0])).toEqual(res.body);
  });

  it('an unsealed one stops only its own org’s chain, at that event; every other org is still sealed and verifies', async () => {
    const victim = await createOrg(t, 'Victim');
    const attacker = await createOrg(t, 'Injected');
    await append(attacker, 'test.before');
    await sealNow();
    // The gauge counts every org this replica's sealer found stopped in the shared database (no org label):
    // only the change this test makes is its to assert.
    const stoppedBefore = await stoppedGauge();
    expect(Number.isFinite(stoppedBefore)).toBe(true);
    const [{ id: poison }] = (
      await su.query(`INSERT INTO runtime_ledger_events (id, org_id, type, metadata) VALUES (gen_random_uuid(), $1, 'test.injected', ${POISON}) RETURNING id`, [attacker])
    ).rows as { id: string }[];
    poisoned.push(poison);
    // More than a sealing batch (2,000) waits behind it: the pass must read past them to reach the victim's event.
    await append(attacker, 'test.after', 2_100);
    await append(victim, 'test.after');

    expect(await sealNow()).toBe(1);
    expect(await sealNow()).toBe(0);
    expect(await unsealed(victim, 'test.after')).toBe(0);
    expect(await unsealed(attacker, 'test.after')).toBe(2_100); // not linked past the stop
    expect(await verify(victim)).toMatchObject({ status: 200, body: { ok: true } });
    const stopped = await verify(attacker);
    expect(stopped.status).toBe(200);
    // Reported as the other off-chain rows are; the sealed part before it (org.created, test.before) checks out.
    expect(stopped.body).toEqual({ ok: false, checked: 2, brokenAt: { chainSeq: 0, eventId: poison, reason: expect.stringMatching(/^unsealed event cannot be hashed/) } });
    expect(await stoppedGauge()).toBe(stoppedBefore + 1);
    // The sealer's line once, not on every pass; the verify that found the break says so too (an error line of its own).
    const lines = t.logs.filter((l) => l.includes(poison) && !l.includes('ledger chain broken'));
    expect(lines.length).toBe(1);
    expect(t.logs.filter((l) => l.includes(poison) && l.includes('ledger chain broken')).length).toBeGreaterThanOrEqual(1);
    expect(lines[0]).toContain(attacker);
    expect(lines.join('\n')).not.toMatch(/1e400|Infinity|"n"/);
    expect((await cli(attacker)).code).toBe(1);

    // Removing it lets the org's chain go on, in order.
    await asSuperuser(`DELETE FROM runtime_ledger_events WHERE id = $1`, [poison]);
    await sealNow(); // a full scan that no longer meets it lifts the stop
    await sealNow();
    expect(await unsealed(attacker, 'test.after')).toBe(0);
    expect(await verify(attacker)).toMatchObject({ status: 200, body: { ok: true, checked: 2 + 2_100 } });
    expect(await stoppedGauge()).toBe(stoppedBefore);
  }, 60_000);

  it('verify still answers, over what is sealed, when sealing fails', async () => {
    const org = await createOrg(t, 'Seal fails');
    await sealNow();
    const spy = vi.spyOn(t.app.get(LedgerSealerService), 'sealNow').mockRejectedValueOnce(new Error('canceling statement due to statement timeout'));
    try {
      await append(org, 'test.unsealed');
      expect(await verify(org)).toEqual({ status: 200, body: { ok: true, checked: 1, headHash: expect.stringMatching(/^[0-9a-f]{64}$/) } });
      expect(spy).toHaveBeenCalledOnce();
    } finally {
      spy.mockRestore();
    }
  });
});
