import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PoliciesService } from '../../src/policy/policies.service.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';

/**
 * Found by a review of personal data outside the ledger's redacted columns. Free text the gateway keeps and shows back
 * is redacted as a tool's input is, whoever wrote it (README): an admin's flag reason and a policy rule's reason (copied
 * to every decision and approval the rule makes) were kept as written. And a tool name or action the catalog does not
 * have is the model's free text, recorded in tool_calls and in the metadata of every event of the call, which is never
 * erased: a customer's email or phone number in it was kept there verbatim (input redaction keeps those in params).
 */
describe('personal data in free text the gateway keeps', () => {
  let h: Harness;
  let org: OrgSetup;
  let ops: string;
  const CARD = '4111 1111 1111 1111';
  const SSN = '123-45-6789';
  const TEXT = `customer disputes card ${CARD}, SSN ${SSN}`;
  const EMAIL = 'jane.doe@example.com';
  const PHONE = '+1 415 555 2671';

  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    ops = (await createKey(h.t, org.orgId, 'ops')).key;
  });
  afterAll(async () => {
    await h?.close();
  });
  const expectClean = (where: string, text: string, secrets: string[] = [CARD, SSN]) => {
    for (const s of secrets) expect(text, `${where} holds ${s}`).not.toContain(s);
  };

  it("a feature flag's reason: kept redacted (GET …/feature-flags, shown to ops keys), its event's digest of what is kept", async () => {
    const put = await h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: true, reason: TEXT });
    expect(put.status, put.text).toBe(200);
    const got = await h.t.http.get(`/v1/orgs/${org.orgId}/feature-flags`).set(bearer(ops));
    expect(got.status).toBe(200);
    const [row] = (await h.t.ds.query("SELECT reason FROM feature_flags WHERE org_id = $1 AND flag = 'tool_calling_enabled'", [org.orgId])) as { reason: string }[];
    expectClean('feature_flags.reason', row.reason);
    expectClean('GET feature-flags (ops)', got.text);
    expect(row.reason).toBe('customer disputes card [REDACTED], SSN [REDACTED]');
    expect(await h.t.http.get('/v1/ledger/verify').query({ orgId: org.orgId }).set(adminAuth).then((r) => r.body as unknown)).toMatchObject({ ok: true });
  });

  it("a policy rule's reason: kept redacted, and so in every decision and approval it makes (shown to ops, experts and the agent)", async () => {
    const rules = [{ id: 'watch', match: { toolName: 'order_lookup.lookup' }, decision: 'require_expert_approval', reason: TEXT }];
    const put = await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules });
    expect(put.status, put.text).toBe(200);
    expectClean('PUT policies answer', put.text);
    const call = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(call.status, call.text).toBe(202);
    const id = call.body.toolCallId as string;
    const story = await h.t.http.get(`/v1/tool-calls/${id}`).set(bearer(ops));
    const pd = await h.t.ds.query('SELECT reason FROM policy_decisions WHERE tool_call_id = $1', [id]);
    const ap = await h.t.ds.query('SELECT reason FROM approval_requests WHERE tool_call_id = $1', [id]);
    expectClean('agent answer', call.text);
    expectClean('policy_decisions.reason', JSON.stringify(pd));
    expectClean('approval_requests.reason', JSON.stringify(ap));
    expectClean('GET /v1/tool-calls/:id (ops)', story.text);
    expect(pd).toEqual([{ reason: 'customer disputes card [REDACTED], SSN [REDACTED]' }]);
    // Put back as GET answers it, the same rules: kept as they are.
    const again = await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules: (await h.t.http.get(`/v1/orgs/${org.orgId}/policies`).set(adminAuth)).body.rules });
    expect(again.status, again.text).toBe(200);
    expect(again.body.rules).toEqual(put.body.rules);
    expect(await h.t.http.get('/v1/ledger/verify').query({ orgId: org.orgId }).set(adminAuth).then((r) => r.body as unknown)).toMatchObject({ ok: true });
    await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules: [] });
  });

  it("a policy stored by the previous release with a rule's reason as written: decisions and approvals made now, and GET, show it redacted", async () => {
    const rules = [{ id: 'watch-old', match: { toolName: 'order_lookup.lookup' }, decision: 'require_expert_approval', reason: 'placeholder' }];
    expect((await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules })).status).toBe(200);
    // As the previous release stored it: the reason as written.
    await h.t.ds.query(`UPDATE policies SET rules = jsonb_set(rules, '{0,reason}', to_jsonb($2::text)) WHERE org_id = $1`, [org.orgId, TEXT]);
    h.t.app.get(PoliciesService).forget(org.orgId);
    const call = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12346' }));
    expect(call.status, call.text).toBe(202);
    const id = call.body.toolCallId as string;
    const pd = await h.t.ds.query('SELECT reason FROM policy_decisions WHERE tool_call_id = $1', [id]);
    const ap = await h.t.ds.query('SELECT reason FROM approval_requests WHERE tool_call_id = $1', [id]);
    expect([pd, ap]).toEqual([[{ reason: 'customer disputes card [REDACTED], SSN [REDACTED]' }], [{ reason: 'customer disputes card [REDACTED], SSN [REDACTED]' }]]);
    const got = await h.t.http.get(`/v1/orgs/${org.orgId}/policies`).set(adminAuth);
    expectClean('GET policies', got.text);
    await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules: [] });
  });

  it('a reason within 500 characters as sent, which redaction makes longer: taken, and kept within 500 (PUT of what GET answered)', async () => {
    const reason = `${'x'.repeat(490)} pin: 4821`; // 500 characters; "pin: [REDACTED]" is 6 more
    const rules = [{ id: 'long', match: { toolName: 'order_lookup.lookup' }, decision: 'allow', reason }];
    const put = await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules });
    expect(put.status, put.text).toBe(200);
    const kept = (put.body as { rules: { reason: string }[] }).rules[0].reason;
    expect([...kept].length).toBeLessThanOrEqual(500);
    expect(kept).not.toContain('4821');
    const flag = await h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: true, reason });
    expect(flag.status, flag.text).toBe(200);
    const [row] = (await h.t.ds.query("SELECT reason FROM feature_flags WHERE org_id = $1 AND flag = 'tool_calling_enabled'", [org.orgId])) as { reason: string }[];
    expect([...row.reason].length).toBeLessThanOrEqual(500);
    expect(row.reason).not.toContain('4821');
    await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules: [] });
  });

  it("an org's name and an API key's name: kept redacted", async () => {
    const created = await h.t.http.post('/v1/orgs').set(adminAuth).send({ name: `Acme ${SSN}` });
    expect(created.status, created.text).toBe(201);
    expect(created.body.name).toBe('Acme [REDACTED]');
    const key = await h.t.http.post('/v1/api-keys').set(adminAuth).send({ orgId: org.orgId, role: 'ops', name: `ops for card ${CARD}` });
    expect(key.status, key.text).toBe(201);
    expect(key.body.name).toBe('ops for card [REDACTED]');
    const rows = await h.t.ds.query('SELECT name FROM orgs WHERE id = $1 UNION ALL SELECT name FROM api_keys WHERE id = $2', [created.body.id, key.body.id]);
    expectClean('orgs.name, api_keys.name', JSON.stringify(rows));
  });

  it.each([
    ['input.action', `refund customer ${EMAIL} ${PHONE}`, (action: string) => toolUse('order_lookup', { action, orderId: '12345' }), 'refund customer [REDACTED] [REDACTED]'],
    // A tool name is 1-128 of [A-Za-z0-9_.-]: a phone number fits.
    ['the tool name', '415-555-2671', (name: string) => toolUse(name, { action: 'lookup', orderId: '12345' }), '[REDACTED]'],
  ])("a customer's contact the model wrote into %s: not kept in the call's row nor its events", async (_, written, use, kept) => {
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use(written));
    expect(res.status, res.text).toBe(403);
    const id = res.body.toolCallId as string;
    const events = (await h.t.ds.query('SELECT type, metadata FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq', [id])) as { type: string; metadata: unknown }[];
    expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.blocked']);
    const [row] = (await h.t.ds.query('SELECT tool_name, action FROM tool_calls WHERE id = $1', [id])) as { tool_name: string; action: string }[];
    const page = await h.t.http.get('/v1/ledger/events').query({ orgId: org.orgId, runId: org.runId }).set(bearer(ops));
    expect(page.status).toBe(200);
    expectClean('the call and its events', JSON.stringify([events, row, page.body]), [EMAIL, PHONE, '415-555-2671']);
    expect(Object.values(row)).toContain(kept);
  });
});
