import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NangoEmulator, ShopifyEmulator } from '../../src/emulator/index.js';
import { JUMIO_EXECUTION_IDS } from '../../src/emulator/jumio.emulator.js';
import { NON_CANONICAL_NANGO_PATHS } from '../../src/vendors/nango/nango-path.cases.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

/**
 * A rule must judge what the vendor will act on: a param with two spellings of one value (an order id
 * with leading zeros, which Shopify reads as the same order) would let a block rule be walked around.
 */
describe('policy rules and the spellings of a value', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a block rule on an order id cannot be walked around with leading zeros: that spelling is refused as invalid input, nothing is sent', async () => {
    const org = await setupOrg(h.t, {
      tools: ['shopify_refund.create'],
      rules: [
        { id: 'never-12345', match: { toolName: 'shopify_refund.create', where: [{ path: 'orderId', op: 'in', value: ['12345'] }] }, decision: 'block' },
        { id: 'refunds-ok', match: { toolName: 'shopify_refund.create' }, decision: 'allow' },
      ],
    });
    const shop = h.emu.vendor<ShopifyEmulator>('shopify');
    const before = shop.refundCount('12345');
    const post = (orderId: string) =>
      h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId, amount: '1.00' }));
    const plain = await post('12345');
    expect([plain.status, plain.body.errorCode]).toEqual([403, 'POLICY_BLOCKED']);
    for (const spelling of ['012345', '0012345']) {
      const res = await post(spelling);
      expect([res.status, res.body.status, res.body.errorCode], spelling).toEqual([422, 'failed', 'INVALID_INPUT']);
    }
    expect(shop.refundCount('12345')).toBe(before);
    expect(h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ })).toBe(0);
  });

  it('a block rule on an amount written as a string matches every spelling of that amount (one refund of 100.00)', async () => {
    const org = await setupOrg(h.t, {
      tools: ['shopify_refund.create'],
      rules: [
        { id: 'no-100', match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'in', value: ['100'] }] }, decision: 'block' },
        { id: 'refunds-ok', match: { toolName: 'shopify_refund.create' }, decision: 'allow' },
      ],
    });
    for (const amount of ['100', '100.0', '100.00', '0100']) {
      const res = await h.t.http
        .post(`/v1/runs/${org.runId}/tool-calls`)
        .set(bearer(org.agentKey))
        .send(toolUse('shopify_refund', { action: 'create', orderId: '1001', amount }));
      expect([res.status, res.body.errorCode], amount).toEqual([403, 'POLICY_BLOCKED']);
    }
    expect(h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ })).toBe(0);
  });

  it('a block rule on a Nango path holds for every spelling of that path: with or without its leading "/", or percent-encoded letters', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.get'],
      vendors: ['nango'],
      rules: [{ id: 'no-admin', match: { toolName: 'nango_proxy.get', where: [{ path: 'path', op: 'eq', value: '/v1/admin/users' }] }, decision: 'block' }],
    });
    const get = (path: string) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('nango_proxy', { action: 'get', path }));
    for (const path of ['/v1/admin/users', 'v1/admin/users']) {
      const res = await get(path);
      expect([res.status, res.body.errorCode], path).toEqual([403, 'POLICY_BLOCKED']);
    }
    const encoded = await get('/v1/%61dmin/users');
    expect([encoded.status, encoded.body.errorCode]).toEqual([422, 'INVALID_INPUT']);
    expect(h.emu.count({ vendor: 'nango' })).toBe(0);
    // The ledger keeps the one spelling the policy judged.
    const rows = (await h.t.ds.query(`SELECT input_redacted FROM tool_calls WHERE run_id = $1 AND error_code = 'POLICY_BLOCKED'`, [org.runId])) as { input_redacted: { path: string } }[];
    expect(rows.map((r) => r.input_redacted.path)).toEqual(['/v1/admin/users', '/v1/admin/users']);
    // Another path still goes through.
    expect((await get('v1/customers/42')).body.status).toBe('succeeded');
  });

  it('a block rule on a Nango path holds against a ";param", an encoded "/" or ":" (refused as invalid input) and a trailing "/" (the rule ignores it); nothing is sent', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.get', 'nango_proxy.post'],
      vendors: ['nango'],
      rules: [
        { id: 'no-admin', match: { toolName: 'nango_proxy.get', where: [{ path: 'path', op: 'eq', value: '/v1/admin/users' }] }, decision: 'block' },
        { id: 'no-batch', match: { toolName: 'nango_proxy.post', where: [{ path: 'path', op: 'eq', value: '/v1/spreadsheets/abc:batchUpdate' }] }, decision: 'block' },
        { id: 'posts-ok', match: { toolName: 'nango_proxy.post' }, decision: 'allow' },
      ],
    });
    const send = (input: Record<string, unknown>) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('nango_proxy', input));
    const nango = h.emu.vendor<NangoEmulator>('nango');
    const before = nango.upstreamRequests.length;
    for (const path of ['/v1/admin/users;x=1', '/v1/admin%2Fusers', '/v1/admin%2fusers']) {
      const res = await send({ action: 'get', path });
      expect([res.status, res.body.errorCode], path).toEqual([422, 'INVALID_INPUT']);
      expect(res.body.toolResult.content, path).toMatch(/path/);
    }
    for (const path of ['/v1/admin/users/', 'v1/admin/users/']) {
      const res = await send({ action: 'get', path });
      expect([res.status, res.body.errorCode], path).toEqual([403, 'POLICY_BLOCKED']);
    }
    for (const path of ['/v1/spreadsheets/abc%3AbatchUpdate', '/v1/spreadsheets/abc%3abatchUpdate']) {
      const res = await send({ action: 'post', path, body: {} });
      expect([res.status, res.body.errorCode], path).toEqual([422, 'INVALID_INPUT']);
    }
    for (const [label, path] of NON_CANONICAL_NANGO_PATHS) {
      expect((await send({ action: 'get', path })).body.errorCode, label).toBe('INVALID_INPUT');
    }
    expect((await send({ action: 'get', path: '/v1/admin/users' })).body.errorCode).toBe('POLICY_BLOCKED');
    expect((await send({ action: 'post', path: 'v1/spreadsheets/abc:batchUpdate', body: {} })).body.errorCode).toBe('POLICY_BLOCKED');
    expect(nango.upstreamRequests.length).toBe(before);
    // Hex digits of an encoding are one spelling too: upper case, whatever the model wrote.
    const res = await send({ action: 'get', path: 'v1/search/caf%c3%a9' });
    expect(res.body.status).toBe('succeeded');
    expect(nango.upstreamRequests.at(-1)?.path).toBe('/v1/search/caf%C3%A9');
    const [row] = (await h.t.ds.query(`SELECT input_redacted FROM tool_calls WHERE id = $1`, [res.body.toolCallId])) as { input_redacted: { path: string } }[];
    expect(row.input_redacted.path).toBe('/v1/search/caf%C3%A9');
    // A trailing "/" the rule does not cover is sent as given (a Django REST API needs it).
    const lead = await send({ action: 'post', path: 'api/v1/lead/', body: { name: 'x' } });
    expect(lead.body.status).toBe('succeeded');
    expect(nango.upstreamRequests.at(-1)?.path).toBe('/api/v1/lead/');
  });

  it('a block rule on a Jumio workflow execution id holds for the same UUID in upper or mixed case; the ledger and Jumio see it in lower case', async () => {
    const blocked = JUMIO_EXECUTION_IDS.processed;
    const org = await setupOrg(h.t, {
      tools: ['kyc.get_status'],
      vendors: ['jumio'],
      rules: [{ id: 'not-this-person', match: { toolName: 'kyc.get_status', where: [{ path: 'workflowExecutionId', op: 'eq', value: blocked }] }, decision: 'block' }],
    });
    const get = (workflowExecutionId: string) =>
      h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('kyc', { action: 'get_status', workflowExecutionId }));
    const executions = () => h.emu.count({ vendor: 'jumio', path: /workflow-executions/ });
    const before = executions();
    for (const id of [blocked, blocked.toUpperCase(), `A1B2c3d4${blocked.slice(8)}`]) {
      const res = await get(id);
      expect([res.status, res.body.errorCode], id).toEqual([403, 'POLICY_BLOCKED']);
    }
    expect(executions()).toBe(before);
    const rows = (await h.t.ds.query(`SELECT input_redacted FROM tool_calls WHERE run_id = $1 AND error_code = 'POLICY_BLOCKED'`, [org.runId])) as { input_redacted: { workflowExecutionId: string } }[];
    expect(rows.map((r) => r.input_redacted.workflowExecutionId)).toEqual([blocked, blocked, blocked]);
    // Another execution in upper case goes through, to Jumio in lower case.
    const other = JUMIO_EXECUTION_IDS.initiated;
    const res = await get(other.toUpperCase());
    expect(res.body.status).toBe('succeeded');
    expect(h.emu.requests.filter((r) => r.vendor === 'jumio' && /workflow-executions/.test(r.path)).at(-1)?.path).toContain(`/workflow-executions/${other}/`);
  });

  it('a rule naming a tool the catalog does not have is refused when saved (it would never apply)', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const res = await h.t.http
      .put(`/v1/orgs/${org.orgId}/policies`)
      .set(adminAuth)
      .send({ rules: [{ id: 'typo', match: { toolName: 'shopify_refunds.create' }, decision: 'block' }] });
    expect([res.status, res.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    expect(res.body.detail).toContain('names no tool action of the catalog');
  });
});
