import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CREDENTIALS, setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth } from '../support/test-app.js';
import { call } from './support.js';

/**
 * Found by a review of operability signals. README "Metrics": vendor_circuit_breaker_open{vendor,state} is "how many org × vendor breakers of this replica refuse
 * calls now"; "When you are paged": a breaker "whose calls failed under credentials since replaced (a wrong shop domain
 * or connection fixed) starts again closed at the next call". Once the admin fixed the credentials, that breaker
 * refuses nothing — yet the gauge keeps it open (the alert keeps firing) for the rest of the cooldown.
 */
describe('vendor_circuit_breaker_open after the org fixed its credentials', () => {
  const COOLDOWN_MS = 600_000;
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ CIRCUIT_BREAKER_THRESHOLD: '2', CIRCUIT_BREAKER_COOLDOWN_MS: String(COOLDOWN_MS), VENDOR_MAX_RETRIES: '0' });
  });
  afterAll(async () => {
    h.emu.clearFaults();
    await h?.close();
  });
  const openSeries = async (): Promise<number> => {
    const m = /^vendor_circuit_breaker_open\{vendor="shopify",state="open"\} (\S+)$/m.exec((await h.t.http.get('/metrics')).text as string);
    return m ? Number(m[1]) : 0;
  };

  it('drops the breaker from the gauge once the credentials it failed under are replaced', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const lookup = () => call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
    const base = await openSeries();
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, times: Infinity });
    const codes: string[] = [];
    for (let i = 0; i < 3; i++) codes.push((await lookup()).body.errorCode as string);
    expect(codes).toEqual(['VENDOR_ERROR', 'VENDOR_ERROR', 'CIRCUIT_OPEN']);
    expect(await openSeries()).toBe(base + 1);
    h.emu.clearFaults();

    // The org's admin fixes the connection (another shop domain): the next call is not refused.
    const fixed = { ...CREDENTIALS.shopify, shopDomain: `fixed-${org.orgId.replace(/-/g, '').slice(0, 20)}.myshopify.com` };
    const put = await h.t.http.put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(adminAuth).send({ config: fixed });
    expect(put.status, JSON.stringify(put.body)).toBeLessThan(300);

    // Reported open (base + 1) until a call came or the 10 min cooldown ended, though it refused nothing.
    const reported = await openSeries();
    const next = await lookup();
    expect(next.body.status).toBe('succeeded'); // it did not refuse
    expect(reported).toBe(base);
  });
});
