import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NANGO_SECRET_KEY } from '../support/secrets.js';
import { CREDENTIALS, setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { call, eventsOf, rowOf, waitFor } from './support.js';

/**
 * The executor holds the org's config for a whole call, retries included (up to VENDOR_TIMEOUT_MS). A change the
 * admin was answered for while the call waits out a Retry-After is in force at once (credentials.service.ts): the
 * retry is not sent, with the old secret nor the new one, and the call ends as the attempt before it did.
 */
describe('credentials replaced or deleted while a call waits to retry', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '5000' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const OTHER_SECRET = '9e8d7c6b-5a49-4382-a1b0-c9d8e7f6a5b4';
  const nangoGets = () => h.emu.requests.filter((r) => r.vendor === 'nango' && r.method === 'GET');
  const credentialsPath = (org: OrgSetup) => `/v1/orgs/${org.orgId}/integrations/nango/credentials`;

  /** A nango_proxy.get whose first attempt is answered 503 + Retry-After: 1, started; resolves once that attempt reached the emulator. */
  async function startRetryingCall(): Promise<{ org: OrgSetup; pending: Promise<{ status: number; body: Record<string, unknown> }> }> {
    const org = await setupOrg(h.t, { tools: ['nango_proxy.get'], vendors: ['nango'] });
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 503, headers: { 'retry-after': '1' } });
    const before = nangoGets().length;
    const pending = Promise.resolve(call(h, org, 'nango_proxy', { action: 'get', path: 'v1/notes' }));
    await waitFor(() => nangoGets().length > before);
    return { org, pending };
  }

  it('a DELETE answered 204 during the wait: nothing more is sent, and the call ends with the 503', async () => {
    const { org, pending } = await startRetryingCall();
    const del = await h.t.http.delete(credentialsPath(org)).set(bearer(org.adminKey));
    expect(del.status).toBe(204);
    const after = nangoGets().length;
    const res = await pending;
    expect(nangoGets().length - after).toBe(0);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
    // The retry that never left is not recorded as one.
    const row = await rowOf(h, res.body.toolCallId as string);
    expect(row).toMatchObject({ status: 'failed', error_code: 'VENDOR_ERROR', vendor_status: 503, retry_count: 0 });
    expect((await eventsOf(h, res.body.toolCallId as string)).map((e) => e.type)).not.toContain('tool_call.retried');
  });

  it('a PUT of other credentials answered 200 during the wait: nothing is sent with either secret', async () => {
    const { org, pending } = await startRetryingCall();
    const put = await h.t.http
      .put(credentialsPath(org))
      .set(bearer(org.adminKey))
      .send({ config: { ...CREDENTIALS.nango, secretKey: OTHER_SECRET, connectionId: 'conn-another-account' } });
    expect(put.status).toBe(200);
    const after = nangoGets().length;
    const res = await pending;
    const sent = nangoGets().slice(after);
    expect(sent.filter((r) => r.headers.authorization === `Bearer ${NANGO_SECRET_KEY}`)).toHaveLength(0);
    expect(sent.filter((r) => r.headers.authorization === `Bearer ${OTHER_SECRET}`)).toHaveLength(0);
    expect(sent).toHaveLength(0);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
  });

  it('credentials unchanged during the wait: the retry is sent after the Retry-After and succeeds', async () => {
    const { pending } = await startRetryingCall();
    const first = nangoGets().length;
    const res = await pending;
    const sent = nangoGets().slice(first);
    expect(sent).toHaveLength(1);
    expect(sent[0].headers.authorization).toBe(`Bearer ${NANGO_SECRET_KEY}`);
    expect(res.body).toMatchObject({ status: 'succeeded' });
    const row = await rowOf(h, res.body.toolCallId as string);
    expect(row).toMatchObject({ status: 'succeeded', retry_count: 1 });
  });
});
