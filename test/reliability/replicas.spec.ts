import type { Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type ShopifyEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { startGatewayProcess, setupOrgVia, type GatewayProcess } from '../support/gateway-process.js';
import { emulatorEnv, toolUse, type OrgSetup } from '../support/scenario.js';
import { postApiKey } from '../support/api-keys.js';
import { adminAuth, bearer } from '../support/test-app.js';
import { leakedIn, postToolUse, secretNeedles, sleep } from './support.js';

/**
 * Three gateway processes on one database (ARCHITECTURE.md "Scale"): every
 * decision that must hold across replicas lives in PostgreSQL, so duplicates
 * and concurrent approvals spread over the replicas still run a call once.
 */
describe('replicas: three gateway processes on one database', () => {
  let emu: VendorEmulator;
  let gws: GatewayProcess[] = [];
  let org: OrgSetup;
  let expertKey: string;

  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    gws = await Promise.all([0, 1, 2].map(() => startGatewayProcess({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '15000' })));
    org = await setupOrgVia(gws[0], { tools: ['shopify_order.add_note', 'shopify_refund.create'] });
    const expert = await postApiKey(gws[1].http, adminAuth, { orgId: org.orgId, role: 'expert', name: 'expert' });
    expect(expert.status).toBe(201);
    expertKey = expert.body.key as string;
  }, 90_000);
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.stop()));
    await emu?.stop();
  });

  it('200 concurrent duplicates of one tool_use across the replicas → one vendor call; the rest replay or 409', async () => {
    const orderUpdates = () => emu.requests.filter((r) => r.body.includes('orderUpdate')).length;
    const before = orderUpdates();
    emu.fault({ vendor: 'shopify', bodyMatch: /orderUpdate/, kind: 'delay', delayMs: 1_500, times: Infinity });
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '1002', note: 'exactly once across replicas' });
    const responses = await Promise.all(Array.from({ length: 200 }, (_, i) => postToolUse(gws[i % 3].http, org.runId, org.agentKey, use)));
    emu.clearFaults();

    expect(orderUpdates() - before).toBe(1);
    const fresh = responses.filter((r) => r.status === 200 && r.body.replayed === false);
    expect(fresh).toHaveLength(1);
    expect(fresh[0].body).toMatchObject({ status: 'succeeded', errorCode: null });
    const toolCallId = fresh[0].body.toolCallId as string;
    const others = responses.filter((r) => r !== fresh[0]);
    const summary = (r: Response) => `${r.status} ${r.body.code ?? r.body.status} replayed=${String(r.body.replayed)}`;
    for (const r of others) {
      if (r.status === 409) {
        expect(r.body.code, summary(r)).toBe('IDEMPOTENCY_IN_PROGRESS');
        expect(r.headers['retry-after']).toBeDefined();
      } else {
        expect(r.status, summary(r)).toBe(200);
        expect(r.body).toMatchObject({ toolCallId, status: 'succeeded', replayed: true });
        expect(r.headers['idempotent-replayed']).toBe('true');
      }
    }
    // Once settled, every replica replays the same outcome.
    for (const gw of gws) {
      const again = await postToolUse(gw.http, org.runId, org.agentKey, use);
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ toolCallId, status: 'succeeded', replayed: true });
    }
    expect(orderUpdates() - before).toBe(1);
  }, 60_000);

  it('30 concurrent approve decisions across the replicas → one 200, 29 × 409, one refund', async () => {
    const shopify = emu.vendor<ShopifyEmulator>('shopify');
    const orderId = '450789469';
    const refundsBefore = shopify.refundCount(orderId);
    const refundCreates = () => emu.requests.filter((r) => r.body.includes('refundCreate')).length;
    const createsBefore = refundCreates();

    const call = await postToolUse(gws[0].http, org.runId, org.agentKey, toolUse('shopify_refund', { action: 'create', orderId, amount: '1.00' }));
    expect(call.status).toBe(202);
    expect(call.body.status).toBe('waiting_approval');
    const toolCallId = call.body.toolCallId as string;
    const list = await gws[1].http.get('/v1/approvals?status=pending&kind=expert').set(bearer(expertKey));
    const approval = (list.body.items as { id: string; toolCallId: string; actionDigest: string }[]).find((a) => a.toolCallId === toolCallId);
    expect(approval).toBeDefined();

    const decisions = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        gws[i % 3].http
          .post(`/v1/approvals/${approval!.id}/decision`)
          .set(bearer(expertKey))
          .send({ decision: 'approve', actionDigest: approval!.actionDigest, reason: `replica ${i % 3}` }),
      ),
    );
    const statuses = decisions.map((d) => d.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(29);
    for (const d of decisions.filter((x) => x.status === 409)) expect(d.body.code).toBe('APPROVAL_ALREADY_DECIDED');
    expect(decisions.find((d) => d.status === 200)!.body).toMatchObject({ id: approval!.id, status: 'approved' });

    // The agent picks the result up by long-poll, on any replica.
    const result = await gws[2].http.get(`/v1/tool-calls/${toolCallId}/result?waitMs=20000`).set(bearer(org.agentKey));
    expect(result.status).toBe(200);
    expect(result.body).toMatchObject({ toolCallId, status: 'succeeded' });
    // Let every replica's approval sweep pass once more: still one refund.
    await sleep(5_500);
    expect(shopify.refundCount(orderId) - refundsBefore).toBe(1);
    expect(refundCreates() - createsBefore).toBe(1);
    const repost = await postToolUse(gws[1].http, org.runId, org.agentKey, toolUse('shopify_refund', { action: 'create', orderId, amount: '1.00' }, call.body.toolResult.tool_use_id as string));
    expect(repost.body).toMatchObject({ toolCallId, status: 'succeeded', replayed: true });
    expect(shopify.refundCount(orderId) - refundsBefore).toBe(1);
  }, 60_000);

  it('the replicas wrote no secret to their output', () => {
    for (const gw of gws) expect(leakedIn(gw.output(), secretNeedles([org.agentKey, org.adminKey, expertKey]))).toEqual([]);
  });
});
