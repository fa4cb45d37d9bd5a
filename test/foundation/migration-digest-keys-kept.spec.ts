import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrgDigestKeys1765800000000 } from '../../migrations/1765800000000-org-digest-keys.js';
import { OrgDigestKeys } from '../../src/orgs/org-digest-keys.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * A deploy rolled back (`migration:revert` of 1765800000000) and rolled forward again (the migration run again, a new
 * process with no key in memory): the orgs keep their digest keys, so a call recorded before is still recognised on
 * resend. Dropping them on revert gave every org a new key, and every resend of such a call was refused 422
 * IDEMPOTENCY_KEY_REUSED for good.
 */
describe('an org digest key survives a revert and re-apply of its migration', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({});
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a call recorded before the revert is replayed (not 422) on resend after the roll-forward', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const post = () => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    const first = await post();
    expect([first.status, first.body.status], JSON.stringify(first.body)).toEqual([200, 'succeeded']);

    // migration:revert, then the migration run again on the roll-forward (a new process: no key in memory).
    const m = new OrgDigestKeys1765800000000();
    const qr = h.t.ds.createQueryRunner();
    try {
      await m.down();
      await m.up(qr);
    } finally {
      await qr.release();
    }
    (h.t.app.get(OrgDigestKeys) as unknown as { keys: Map<string, unknown> }).keys.clear();

    const sent = h.emu.requests.length;
    const again = await post();
    expect([again.status, again.body.toolCallId, again.body.replayed], JSON.stringify(again.body)).toEqual([200, first.body.toolCallId, true]);
    expect(h.emu.requests.length).toBe(sent);
  });
});
