import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { approvalFor, refundUse } from './support.js';

/**
 * An approval past its expiry is expired the moment it passes (a decision then is refused), while
 * the sweep that writes it down runs every few seconds: reads must not show it pending meanwhile.
 */
describe('an approval past its expiry, before the sweep wrote it down', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '60' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('reads as expired (GET, status filters), its call blocked APPROVAL_EXPIRED, as deciding it now answers', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('4.00'));
    expect(res.status).toBe(202);
    const approval = await approvalFor(h, expert.key, res.body.toolCallId as string);
    const ids = async (status: string) =>
      ((await h.t.http.get(`/v1/approvals?status=${status}&limit=200`).set(bearer(expert.key))).body.items as { id: string }[]).map((a) => a.id);
    expect(await ids('pending')).toContain(approval.id);
    expect(await ids('expired')).not.toContain(approval.id);

    const clock = h.t.app.get(Clock);
    clock.advance(61_000); // past the expiry; no sweep has run
    try {
      const [stored] = (await h.t.ds.query('SELECT status FROM approval_requests WHERE id = $1', [approval.id])) as { status: string }[];
      expect(stored.status).toBe('pending'); // not written down yet
      // Its call is shown as every read of the call answers it, not as still waiting beside an expired approval.
      const shown = (await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(expert.key))).body as Record<string, unknown>;
      expect(shown).toMatchObject({ status: 'expired', toolCallStatus: 'blocked', toolCallErrorCode: 'APPROVAL_EXPIRED' });
      expect(await ids('pending')).not.toContain(approval.id);
      expect(await ids('expired')).toContain(approval.id);
      const listed = ((await h.t.http.get('/v1/approvals?status=expired&limit=200').set(bearer(expert.key))).body.items as Record<string, unknown>[]).find((a) => a.id === approval.id);
      expect(listed).toMatchObject({ status: 'expired', toolCallStatus: 'blocked', toolCallErrorCode: 'APPROVAL_EXPIRED' });
      const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
      expect([decided.status, decided.body.code]).toEqual([409, 'APPROVAL_ALREADY_DECIDED']);
      expect((await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(expert.key))).body.status).toBe('expired');
    } finally {
      clock.advance(-61_000);
    }
  });
});
