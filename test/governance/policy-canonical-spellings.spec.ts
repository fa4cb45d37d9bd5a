import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { actionDigest } from '../../src/common/canonical-json.js';
import { JUMIO_EXECUTION_IDS } from '../../src/emulator/jumio.emulator.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * Policy rules compare params "as the vendor receives them" (README, Tools): two spellings of one effective
 * request must not be judged differently.
 */
describe('policy: one spelling per effective request (defaults and look-alikes)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('kyc.get_status: omitting includeDetails (default true) walks around a rule on includeDetails eq true', async () => {
    const org = await setupOrg(h.t, {
      tools: ['kyc.get_status'],
      vendors: ['jumio'],
      rules: [
        { id: 'no-kyc-details', match: { toolName: 'kyc.get_status', where: [{ path: 'includeDetails', op: 'eq', value: true }] }, decision: 'block' },
      ],
    });
    const get = (input: Record<string, unknown>) =>
      h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('kyc', { action: 'get_status', ...input }));
    const id = JUMIO_EXECUTION_IDS.processed;
    const explicit = await get({ workflowExecutionId: id, includeDetails: true });
    expect([explicit.status, explicit.body.errorCode]).toEqual([403, 'POLICY_BLOCKED']);
    const before = h.emu.count({ vendor: 'jumio', path: /workflow-executions/ });
    // The same effective request (the handler fetches the decision unless includeDetails === false).
    const omitted = await get({ workflowExecutionId: id });
    expect([omitted.status, omitted.body.errorCode], JSON.stringify(omitted.body.result)).toEqual([403, 'POLICY_BLOCKED']);
    expect(h.emu.count({ vendor: 'jumio', path: /workflow-executions/ })).toBe(before);
  });

  it('kyc.get_status: the digest stays over the params as sent (a call recorded before the default was spelled out replays); the ledger shows the default', async () => {
    const org = await setupOrg(h.t, { tools: ['kyc.get_status'], vendors: ['jumio'] });
    const id = JUMIO_EXECUTION_IDS.processed;
    const use = toolUse('kyc', { action: 'get_status', workflowExecutionId: id });
    const first = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(first.status).toBe(200);
    const [row] = (await h.t.ds.query('SELECT action_digest, input_redacted FROM tool_calls WHERE id = $1', [first.body.toolCallId])) as {
      action_digest: string;
      input_redacted: unknown;
    }[];
    const [{ digest_key: key }] = (await h.t.ds.query('SELECT digest_key FROM orgs WHERE id = $1', [org.orgId])) as { digest_key: Buffer }[];
    expect(row.action_digest).toBe(actionDigest({ toolName: 'kyc', action: 'get_status', params: { workflowExecutionId: id } }, key));
    expect(row.input_redacted).toEqual({ workflowExecutionId: id, includeDetails: true });
    const sent = h.emu.count({ vendor: 'jumio', path: /workflow-executions/ });
    const again = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect([again.status, again.body.toolCallId]).toEqual([200, first.body.toolCallId]);
    expect(h.emu.count({ vendor: 'jumio', path: /workflow-executions/ })).toBe(sent);
  });

  it('nango_proxy: an NFKC look-alike of "/" or of a letter walks around a block rule on the path (%2F and %61 are refused)', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.get'],
      vendors: ['nango'],
      rules: [{ id: 'no-admin', match: { toolName: 'nango_proxy.get', where: [{ path: 'path', op: 'eq', value: '/v1/admin/users' }] }, decision: 'block' }],
    });
    const get = (path: string) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('nango_proxy', { action: 'get', path }));
    // The gateway's own stance: %2F is refused because servers may read it as "/", and NFKC look-alikes of ?, #, {, }, .. are refused.
    expect((await get('/v1/admin%2Fusers')).status).toBe(422);
    expect((await get('/v1/x%EF%BC%9Fa=1')).status).toBe(422);
    const before = h.emu.count({ vendor: 'nango' });
    // FULLWIDTH SOLIDUS (U+FF0F) and FULLWIDTH LATIN SMALL LETTER A (U+FF41): NFKC gives "/v1/admin/users".
    for (const path of ['/v1/admin%EF%BC%8Fusers', '/v1/%EF%BD%81dmin/users']) {
      expect(decodeURIComponent(path).normalize('NFKC')).toBe('/v1/admin/users');
      const res = await get(path);
      expect([403, 422], `${path}: ${res.status} ${res.body.status}`).toContain(res.status);
    }
    expect(h.emu.count({ vendor: 'nango' })).toBe(before);
  });
});
