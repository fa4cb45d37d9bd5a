import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PastTheTrigger } from '../support/past-the-trigger.js';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * The chain's hash covers an event's position, not its seq. Verify took "the flag's last feature_flag.changed event"
 * by seq: the table's owner (past the append-only trigger) deleted the event that switched the flag on and put it
 * back as it was under a higher seq (OVERRIDING SYSTEM VALUE), switched the flag back on, and verify, anchored or
 * not, said intact. It now takes events in chain order. Found by a review of the ledger against someone with SQL access.
 */
describe('verify of an event put back under another seq', () => {
  let t: TestApp;
  let su: PastTheTrigger;
  beforeAll(async () => {
    t = await startTestApp({ LEDGER_SEAL_INTERVAL_MS: '60000' });
    su = await PastTheTrigger.connect();
  });
  afterAll(async () => {
    await su?.end();
    await t?.close();
  });

  type Verified = { ok: boolean; checked: number; headHash?: string; brokenAt?: { chainSeq: number; eventId: string | null; reason: string } };
  const verify = async (orgId: string, anchor?: string) =>
    (await t.http.get('/v1/ledger/verify').query(anchor === undefined ? { orgId } : { orgId, anchor }).set(adminAuth)).body as Verified;

  it('a flag switched on again, its "on" event moved after its "off" by seq: a break, with the anchor too', async () => {
    const org = await createOrg(t, 'Seq rewrite');
    const flag = (enabled: boolean, reason: string) => t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled, reason });
    expect((await flag(true, 'pilot')).status).toBe(200);
    expect((await flag(false, 'pilot over')).status).toBe(200);
    const before = await verify(org);
    expect(before).toMatchObject({ ok: true });
    const anchor = `${before.checked}:${before.headHash}`;

    const [on] = (await t.ds.query(
      `SELECT id, chain_seq FROM runtime_ledger_events WHERE org_id = $1 AND type = 'feature_flag.changed' AND metadata->'to' = 'true'`,
      [org],
    )) as { id: string; chain_seq: string }[];
    await su.transaction(async (q) => {
      await q(`CREATE TEMP TABLE moved ON COMMIT DROP AS SELECT * FROM runtime_ledger_events WHERE id = $1`, [on!.id]);
      await q(`DELETE FROM runtime_ledger_events WHERE id = $1`, [on!.id]);
      // The next seq the table hands out, taken from its sequence (so the gateway's own next event does not meet it).
      await q(`UPDATE moved SET seq = nextval(pg_get_serial_sequence('runtime_ledger_events', 'seq'))`);
      await q(`INSERT INTO runtime_ledger_events OVERRIDING SYSTEM VALUE SELECT * FROM moved`);
      await q(`UPDATE feature_flags SET enabled = true, reason = 'pilot' WHERE org_id = $1 AND flag = 'tool_calling_enabled'`, [org]);
    });
    // The chain itself is as it was: every event at its position, with its hash.
    const [moved] = (await t.ds.query('SELECT chain_seq FROM runtime_ledger_events WHERE id = $1', [on!.id])) as { chain_seq: string }[];
    expect(moved!.chain_seq).toBe(on!.chain_seq);

    for (const result of [await verify(org), await verify(org, anchor)]) {
      expect(result).toMatchObject({ ok: false, brokenAt: { reason: expect.stringMatching(/flag/) } });
    }
  });
});
