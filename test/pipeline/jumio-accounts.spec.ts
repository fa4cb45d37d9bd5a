import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { actionDigest } from '../../src/common/canonical-json.js';
import { JUMIO_ACCOUNT_IDS, JUMIO_EXECUTION_IDS } from '../../src/emulator/jumio.emulator.js';
import { CREDENTIALS, setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

/**
 * Jumio KYX keeps one account per end user, and a workflow execution is found only under its own account
 * (GET /api/v1/accounts/{accountId}/workflow-executions/{id}, VENDORS.md §3.2). kyc.get_status names the account in
 * its accountId param; the org's credentials hold only a default one. Driven end to end over HTTP: the gateway, its
 * ledger and the Jumio emulator, which files the executions of two accounts apart and answers 404 under the wrong one.
 */
describe('kyc.get_status: the execution is asked for under the end user\'s own Jumio account', () => {
  let h: Harness;
  // Credentials naming the emulator's primary account as the org's default.
  let org: OrgSetup;
  const { primary, second } = JUMIO_ACCOUNT_IDS;

  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['kyc.get_status'], vendors: ['jumio'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  const get = (o: OrgSetup, input: Record<string, unknown>) =>
    h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(toolUse('kyc', { action: 'get_status', ...input }));
  /** The account of every retrieval request the emulator received since request number `from`. */
  const accountsAskedSince = (from: number) =>
    h.emu.requests.slice(from).filter((r) => r.vendor === 'jumio' && r.path.includes('/workflow-executions/')).map((r) => r.path.split('/')[4]);
  const rowOf = async (id: string) =>
    ((await h.t.ds.query('SELECT status, error_code, error_text, input_redacted, action_digest, vendor_refused FROM tool_calls WHERE id = $1', [id])) as Record<string, unknown>[])[0];

  it("a PROCESSED execution under a second end user's account is read when the call names that account", async () => {
    const from = h.emu.requests.length;
    const res = await get(org, { workflowExecutionId: JUMIO_EXECUTION_IDS.secondProcessed, accountId: second });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', errorCode: null, result: { workflowExecutionId: JUMIO_EXECUTION_IDS.secondProcessed, status: 'PROCESSED' } });
    expect(accountsAskedSince(from)).toEqual([second, second]); // the status, then the details
  });

  it('without accountId the credentials\' default account is used (and the second account\'s execution is not found there)', async () => {
    const from = h.emu.requests.length;
    const res = await get(org, { workflowExecutionId: JUMIO_EXECUTION_IDS.processed });
    expect(res.body).toMatchObject({ status: 'succeeded', result: { workflowExecutionId: JUMIO_EXECUTION_IDS.processed, status: 'PROCESSED' } });
    expect(accountsAskedSince(from)).toEqual([primary, primary]);
    const wrong = await get(org, { workflowExecutionId: JUMIO_EXECUTION_IDS.secondProcessed });
    expect(wrong.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_NOT_FOUND' });
  });

  it('an accountId in upper case is recorded, digested, judged by the policy and sent in lower case', async () => {
    const rules = [{ id: 'not-this-user', match: { toolName: 'kyc.get_status', where: [{ path: 'accountId', op: 'exists' }, { path: 'accountId', op: 'eq', value: second }] }, decision: 'block' }];
    const guarded = await setupOrg(h.t, { tools: ['kyc.get_status'], vendors: ['jumio'], rules });
    const blocked = await get(guarded, { workflowExecutionId: JUMIO_EXECUTION_IDS.secondProcessed, accountId: second.toUpperCase() });
    expect([blocked.status, blocked.body.errorCode]).toEqual([403, 'POLICY_BLOCKED']);

    const from = h.emu.requests.length;
    const input = { workflowExecutionId: JUMIO_EXECUTION_IDS.secondProcessed.toUpperCase(), accountId: second.toUpperCase() };
    const res = await get(org, input);
    expect(res.body).toMatchObject({ status: 'succeeded', result: { workflowExecutionId: JUMIO_EXECUTION_IDS.secondProcessed, status: 'PROCESSED' } });
    expect(accountsAskedSince(from)).toEqual([second, second]);
    const lower = { workflowExecutionId: JUMIO_EXECUTION_IDS.secondProcessed, accountId: second };
    const row = await rowOf(res.body.toolCallId as string);
    expect(row.input_redacted).toEqual({ ...lower, includeDetails: true });
    const [{ digest_key: key }] = (await h.t.ds.query('SELECT digest_key FROM orgs WHERE id = $1', [org.orgId])) as { digest_key: Buffer }[];
    expect(row.action_digest).toBe(actionDigest({ toolName: 'kyc', action: 'get_status', params: lower }, key));
  });

  it('credentials need their default account: without one, or a malformed one, they are refused', async () => {
    const org = await setupOrg(h.t, { tools: ['kyc.get_status'], vendors: [] });
    const { accountId: _default, ...config } = CREDENTIALS.jumio;
    const missing = await h.t.http.put(`/v1/orgs/${org.orgId}/integrations/jumio/credentials`).set(adminAuth).send({ config });
    expect([missing.status, missing.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    expect(missing.body.detail).toContain('accountId');
    const bad = await h.t.http.put(`/v1/orgs/${org.orgId}/integrations/jumio/credentials`).set(adminAuth).send({ config: { ...config, accountId: 'not/an-account' } });
    expect([bad.status, bad.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    expect(bad.body.detail).toContain('accountId');
  });

});
