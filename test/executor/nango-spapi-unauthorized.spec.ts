import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { call, rowOf, setupNangoOrg } from './support.js';

/**
 * SP-API answers a missing, revoked or expired access token with 403 `Unauthorized`, not 401 (VENDORS.md §0, §2.3),
 * and Nango, which adds the token itself, hands it back as it came (§4.2). Read as the vendor refusing the input
 * (VENDOR_ERROR) it pointed the agent at its params; it is the connection's credentials, as an upstream 401 is.
 * Found by a review of the emulator's fidelity.
 */
describe('Nango → SP-API: the connection\'s token refused (403 Unauthorized)', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupNangoOrg(h.t);
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });

  it('GET /orders/v0/orders/{id} answered 403 Unauthorized "has expired" → CREDENTIALS_INVALID (as an upstream 401 is), not VENDOR_ERROR', async () => {
    const body = { errors: [{ code: 'Unauthorized', message: 'Access to requested resource is denied.', details: 'The access token you provided has expired.' }] };
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 403, body, headers: { 'x-amzn-requestid': 'abc', 'content-type': 'application/json' } });
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'orders/v0/orders/112-0000001-1234567' });
    const row = await rowOf(h, res.body.toolCallId as string);
    expect({ status: res.body.status, code: res.body.errorCode, text: row.error_text }).toMatchObject({ status: 'failed', code: 'CREDENTIALS_INVALID' });
  });

  it("a 403 naming MissingAuthenticationToken (API Gateway's answer for a path it does not route) and another 403 stay VENDOR_ERROR: the request's, not the credentials'", async () => {
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 403, body: '', headers: { 'x-amzn-errortype': 'MissingAuthenticationTokenException' }, times: 1 });
    const unrouted = await call(h, org, 'nango_proxy', { action: 'get', path: 'orders/v0/order/112-0000001-1234567' });
    expect([unrouted.body.status, unrouted.body.errorCode]).toEqual(['failed', 'VENDOR_ERROR']);
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 403, body: { errors: [{ code: 'InvalidInput', message: 'bad marketplace' }] }, times: 1 });
    const other = await call(h, org, 'nango_proxy', { action: 'get', path: 'orders/v0/orders/112-0000001-1234568' });
    expect([other.body.status, other.body.errorCode]).toEqual(['failed', 'VENDOR_ERROR']);
  });
});
