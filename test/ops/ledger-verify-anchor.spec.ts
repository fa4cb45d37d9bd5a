import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { ledgerVerifyCommand } from '../../src/ops/ledger-verify.command.js';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Verify against an anchor (`anchor=<chainSeq>:<hash>`, an earlier answer's checked and headHash kept outside the
 * database). Whoever can get past the append-only trigger (the table's owner, a superuser) can un-seal events, rewrite
 * them and have the sealer chain them again: without an anchor verify answered ok, with a new headHash.
 */
describe('ledger verify against an anchor kept outside the database', () => {
  let t: TestApp;
  let su: pg.Client;
  beforeAll(async () => {
    t = await startTestApp({ LEDGER_SEAL_INTERVAL_MS: '60000' });
    su = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await su.connect();
  });
  afterAll(async () => {
    await su?.end();
    await t?.close();
  });

  type Verified = { ok: boolean; checked: number; headHash?: string; brokenAt?: { chainSeq: number; eventId: string | null; reason: string } };
  const verify = async (orgId: string, anchor?: string) => {
    const res = await t.http.get('/v1/ledger/verify').query(anchor === undefined ? { orgId } : { orgId, anchor }).set(adminAuth);
    return { status: res.status, body: res.body as Verified };
  };
  const cli = async (args: string[]) => {
    const out: string[] = [];
    const code = await ledgerVerifyCommand(args, { DATABASE_URL: process.env.DATABASE_URL }, { out: (l) => out.push(l), err: () => undefined });
    return { code, body: out[0] === undefined ? undefined : (JSON.parse(out[0]) as Verified) };
  };
  /** Past the append-only trigger, as the table's owner or a superuser can be. */
  async function bypassingTrigger(sql: string, params: unknown[]): Promise<void> {
    await su.query('BEGIN');
    await su.query('SET LOCAL session_replication_role = replica');
    await su.query(sql, params);
    await su.query('COMMIT');
  }
  async function orgWithChain(n: number): Promise<{ org: string; anchor: string; checked: number }> {
    const org = await createOrg(t, 'Anchored');
    for (let i = 0; i < n; i++) await t.app.get(LedgerEventsService).append([{ orgId: org, type: 'test.step', metadata: { i, amount: `${i}.00` } }]);
    await t.app.get(LedgerSealerService).sealNow();
    const { body } = await verify(org);
    expect(body).toMatchObject({ ok: true });
    return { org, anchor: `${body.checked}:${body.headHash}`, checked: body.checked };
  }

  it('an intact chain holds its anchor, and still does once it has grown (API and CLI)', async () => {
    const { org, anchor } = await orgWithChain(4);
    expect((await verify(org, anchor)).body).toMatchObject({ ok: true });
    await t.app.get(LedgerEventsService).append([{ orgId: org, type: 'test.step', metadata: { i: 99 } }]);
    const grown = await verify(org, anchor);
    expect(grown.body).toMatchObject({ ok: true });
    expect(grown.body.headHash).not.toBe(anchor.split(':')[1]);
    expect(await cli(['--org', org, '--anchor', anchor])).toMatchObject({ code: 0, body: { ok: true } });
  });

  it('history rewritten and re-chained by the sealer past the trigger: ok without the anchor, broken at it with it', async () => {
    const { org, anchor, checked } = await orgWithChain(8);
    await bypassingTrigger(`UPDATE runtime_ledger_events SET chain_seq = NULL, prev_hash = NULL, hash = NULL, sealed_at = NULL WHERE org_id = $1 AND chain_seq >= 5`, [org]);
    await bypassingTrigger(`UPDATE runtime_ledger_events SET metadata = '{"i":4,"amount":"4000.00"}' WHERE org_id = $1 AND metadata->>'i' = '4'`, [org]);
    const plain = await verify(org);
    expect(plain.body).toMatchObject({ ok: true, checked });
    const anchored = await verify(org, anchor);
    expect(anchored.body).toMatchObject({
      ok: false,
      brokenAt: { chainSeq: checked, reason: 'the event at the anchor is not the one anchored: the chain was rewritten at or before it and sealed again' },
    });
    expect(anchored.body.brokenAt?.eventId).toEqual(expect.any(String));
    const byCli = await cli(['--org', org, '--anchor', anchor, '--no-seal']);
    expect(byCli).toMatchObject({ code: 1, body: { ok: false, brokenAt: { chainSeq: checked } } });
  });

  it('events cut from the end past the trigger: broken at the anchor, naming where the chain now ends', async () => {
    const { org, anchor, checked } = await orgWithChain(6);
    await bypassingTrigger('DELETE FROM runtime_ledger_events WHERE org_id = $1 AND chain_seq > $2', [org, checked - 2]);
    expect((await verify(org)).body).toMatchObject({ ok: true, checked: checked - 2 });
    expect((await verify(org, anchor)).body).toMatchObject({
      ok: false,
      brokenAt: { chainSeq: checked, eventId: null, reason: `the chain ends at ${checked - 2}, before the anchor at ${checked}: events were cut from its end` },
    });
  });

  it('a malformed anchor is a 400 (API) or a usage error (CLI), never a verify without it', async () => {
    const { org } = await orgWithChain(1);
    for (const bad of ['', '0:' + 'a'.repeat(64), '3:' + 'A'.repeat(64), '3:abc', `3:${'a'.repeat(64)}:x`, `-1:${'a'.repeat(64)}`]) {
      const res = await verify(org, bad);
      expect(res.status, bad).toBe(400);
    }
    expect((await cli(['--org', org, '--anchor', '3:abc'])).code).toBe(2);
    expect((await cli(['--org', org, '--anchor'])).code).toBe(2);
  });
  it('an anchor position past what is read exactly (16 digits) is refused: 400, not answered about another position', async () => {
    const { org } = await orgWithChain(2);
    const hash = 'a'.repeat(64);
    for (const position of ['9007199254740993', '9999999999999999']) {
      const res = await t.http.get('/v1/ledger/verify').query({ orgId: org, anchor: `${position}:${hash}` }).set(adminAuth);
      expect([res.status, res.body.code], position).toEqual([400, 'VALIDATION_FAILED']);
    }
    expect((await cli(['--org', org, '--anchor', `9007199254740993:${hash}`])).code).toBe(2);
    // The longest accepted, 15 digits, is answered about that very position.
    const far = await verify(org, `999999999999999:${hash}`);
    expect(far.status).toBe(200);
    expect(JSON.stringify(far.body)).not.toContain('1000000000000000');
  });
});
