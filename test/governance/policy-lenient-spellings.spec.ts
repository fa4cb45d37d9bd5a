import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NangoEmulator } from '../../src/emulator/index.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';
import { expectProblem } from './governance.helpers.js';

/**
 * README "Policy rules": a param spelt in a way a provider reads as the rule's value though it is not the same JSON
 * ("+12" for 12, "True" for true, an NFD accent, a path in another letter case) cannot be decided, so the rule blocks
 * the call and nothing reaches the vendor. A PUT refuses a where path below a Nango query value and a rule an earlier
 * rule without where conditions shadows: neither could ever match.
 */
describe('policy rules and lenient spellings (Nango)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const nangoOrg = (rules: unknown[]) => setupOrg(h.t, { tools: ['nango_proxy.get'], vendors: ['nango'], rules });

  it('a block "query.account eq 12" is not walked around by "+12", "1.2e1" or " 12": blocked, nothing sent', async () => {
    const org = await nangoOrg([{ id: 'no-12', match: { toolName: 'nango_proxy.get', where: [{ path: 'query.account', op: 'eq', value: 12 }] }, decision: 'block' }]);
    const nango = h.emu.vendor<NangoEmulator>('nango');
    const send = (query: Record<string, unknown>) =>
      h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('nango_proxy', { action: 'get', path: '/v1/accounts', query }));
    expect((await send({ account: '13' })).body.status).toBe('succeeded');
    for (const account of ['+12', '1.2e1', ' 12']) {
      const before = nango.upstreamRequests.length;
      const res = await send({ account });
      const sent = nango.upstreamRequests.slice(before).map((r) => r.path);
      expect({ account, status: res.body.status, errorCode: res.body.errorCode, sent }).toEqual({ account, status: 'blocked', errorCode: 'POLICY_BLOCKED', sent: [] });
    }
  });

  it('a block "query.include_deleted eq true" is not walked around by "True" or "1", nor a name block by an NFD accent', async () => {
    const org = await nangoOrg([
      { id: 'no-deleted', match: { toolName: 'nango_proxy.get', where: [{ path: 'query.include_deleted', op: 'eq', value: true }] }, decision: 'block' },
      { id: 'no-jose', match: { toolName: 'nango_proxy.get', where: [{ path: 'query.name', op: 'eq', value: 'Jos\u00e9' }] }, decision: 'block' },
    ]);
    const send = (query: Record<string, unknown>) =>
      h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('nango_proxy', { action: 'get', path: '/v1/users', query }));
    expect((await send({ include_deleted: 'false', name: 'Jose' })).body.status).toBe('succeeded');
    for (const query of [{ include_deleted: 'True' }, { include_deleted: '1' }, { name: 'Jose\u0301' }]) {
      const res = await send(query);
      expect({ query, errorCode: res.body.errorCode }).toEqual({ query, errorCode: 'POLICY_BLOCKED' });
    }
  });

  it('a block on path "/v1/admin/users" is not walked around by "/v1/Admin/Users"', async () => {
    const org = await nangoOrg([{ id: 'no-admin', match: { toolName: 'nango_proxy.get', where: [{ path: 'path', op: 'eq', value: '/v1/admin/users' }] }, decision: 'block' }]);
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('nango_proxy', { action: 'get', path: '/v1/Admin/Users' }));
    expect({ status: res.body.status, errorCode: res.body.errorCode }).toEqual({ status: 'blocked', errorCode: 'POLICY_BLOCKED' });
  });

  const put = async (rules: unknown[]) => {
    const org = await setupOrg(h.t, { tools: ['nango_proxy.get'], vendors: ['nango'] });
    return h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules });
  };

  it('PUT refuses 400 VALIDATION_FAILED a where path below a Nango query value ("query.page.size")', async () => {
    const res = await put([{ id: 'no-big-pages', match: { toolName: 'nango_proxy.get', where: [{ path: 'query.page.size', op: 'eq', value: '1000' }] }, decision: 'block' }]);
    expectProblem(res, 400, 'VALIDATION_FAILED');
    expect(res.body.errors).toEqual(['rules[0] ("no-big-pages"): where[0].path "query.page.size" is never present in a call of nango_proxy.get (GET /v1/tools lists their input schemas)']);
  });

  it('PUT refuses 400 VALIDATION_FAILED a rule an earlier rule without where shadows, naming both', async () => {
    const res = await put([
      { id: 'refunds-ok', match: { toolName: 'shopify_refund.*' }, decision: 'allow' },
      { id: 'big-refunds', match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'gt', value: 1000 }] }, decision: 'block' },
    ]);
    expectProblem(res, 400, 'VALIDATION_FAILED');
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors[0]).toMatch(/^rules\[1\] \("big-refunds"\): can never match: rules\[0\] \("refunds-ok"\) comes first/);
  });
});
