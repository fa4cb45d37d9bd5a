import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { aroundStatements } from '../approvals/support.js';
import { CREDENTIALS, setupOrg, shopDomainOf, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

/**
 * A refund whose org's Shopify credentials are deleted while it is under way (found by a model-based run of the call
 * and approval lifecycle): the delete lands after the executor loaded the credentials and before the refund takes its
 * order lease. The refund is not sent, as before; but the call ended failed / EXECUTION_ERROR ("the gateway's own
 * failure, it may work later"), where a call a moment later gets CREDENTIALS_NOT_FOUND (API.md §4, ARCHITECTURE step
 * 9) for the same state. Now a send that finds its credentials deleted after a wait ends CREDENTIALS_NOT_FOUND; one
 * that finds them replaced by another config still ends EXECUTION_ERROR (a new call uses the new config), and the same
 * config put again lets the refund run.
 */
describe('a refund whose credentials are deleted while it is under way', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const refundsSent = () => h.emu.requests.filter((r) => r.applied && /mutation Refund/.test(r.body)).length;

  /** Runs `during` once, just before the org's refund takes its order lease. */
  function beforeLease(org: OrgSetup, during: () => Promise<unknown>): () => void {
    let done = false;
    return aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (!done && text.includes('INSERT INTO shopify_refund_leases') && params[0] === org.orgId) {
        done = true;
        await during();
      }
      return send();
    });
  }

  it('an approved refund: failed / CREDENTIALS_NOT_FOUND (nothing sent), not EXECUTION_ERROR', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '0.01' }));
    expect(posted.status).toBe(202);
    const approval = ((await h.t.http.get('/v1/approvals?status=pending').set(bearer(expert.key))).body.items as { id: string; toolCallId: string; actionDigest: string }[]).find(
      (a) => a.toolCallId === posted.body.toolCallId,
    )!;
    const before = refundsSent();
    const undo = beforeLease(org, async () => {
      const del = await h.t.http.delete(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(bearer(org.adminKey));
      expect(del.status).toBe(204);
    });
    try {
      const d = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
      expect(d.status).toBe(200);
      const settled = await h.t.http.get(`/v1/tool-calls/${posted.body.toolCallId}/result?waitMs=8000`).set(bearer(org.agentKey));
      expect(refundsSent() - before).toBe(0);
      expect({ status: settled.body.status, errorCode: settled.body.errorCode }).toEqual({ status: 'failed', errorCode: 'CREDENTIALS_NOT_FOUND' });
    } finally {
      undo();
    }
  });

  it('a refund the policy allows: the same', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'ok', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }] });
    const before = refundsSent();
    const undo = beforeLease(org, async () => {
      const del = await h.t.http.delete(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(bearer(org.adminKey));
      expect(del.status).toBe(204);
    });
    try {
      const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '0.01' }));
      expect(refundsSent() - before).toBe(0);
      expect([res.status, res.body.status, res.body.errorCode]).toEqual([200, 'failed', 'CREDENTIALS_NOT_FOUND']);
    } finally {
      undo();
    }
  });

  it('replaced by another config meanwhile: not sent, EXECUTION_ERROR (a new call uses the new config), not CREDENTIALS_NOT_FOUND', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'ok', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }] });
    const before = refundsSent();
    const undo = beforeLease(org, async () => {
      const other = { ...CREDENTIALS.shopify, shopDomain: shopDomainOf(org.orgId), accessToken: `${CREDENTIALS.shopify.accessToken}0` };
      const put = await h.t.http.put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(bearer(org.adminKey)).send({ config: other });
      expect(put.status).toBe(200);
    });
    try {
      const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '0.01' }));
      expect(refundsSent() - before).toBe(0);
      expect([res.status, res.body.status, res.body.errorCode]).toEqual([200, 'failed', 'EXECUTION_ERROR']);
      const [row] = (await h.t.ds.query('SELECT error_text FROM tool_calls WHERE id = $1', [res.body.toolCallId])) as { error_text: string }[];
      expect(row.error_text).toMatch(/credentials were replaced while this refund waited for the order; nothing was sent/);
    } finally {
      undo();
    }
  });

  it('(control) the same credentials put again (a rotation to the same config) meanwhile: the refund still runs', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'ok', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }] });
    const before = refundsSent();
    const undo = beforeLease(org, async () => {
      const put = await h.t.http.put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(bearer(org.adminKey)).send({ config: { ...CREDENTIALS.shopify, shopDomain: shopDomainOf(org.orgId) } });
      expect(put.status).toBe(200);
    });
    try {
      const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '0.01' }));
      expect([res.status, res.body.status, refundsSent() - before]).toEqual([200, 'succeeded', 1]);
    } finally {
      undo();
    }
  });
});
