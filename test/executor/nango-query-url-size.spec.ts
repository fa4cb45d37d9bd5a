import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NANGO_TARGET_MAX } from '../../src/vendors/nango/nango-path.js';
import { startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { call, rowOf, setupNangoOrg } from './support.js';

/**
 * nango_proxy.get's definition allows 100 query values of 2,048 characters, and a non-ASCII character goes as 6 to
 * 12 characters of percent-encoding: a query within every per-value limit could make a URL of 100 KB, which Nango (a
 * Node server: request line and headers within 16 KiB) refuses with 431. Before, that was a vendor call made,
 * recorded "upstream rejected the request: HTTP 431 (via Nango)" and handed to the model as a VENDOR_ERROR naming
 * neither the query nor its size. Now the encoded URL is measured before anything is sent.
 */
describe('nango_proxy.get: a query whose URL no proxy takes', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupNangoOrg(h.t);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('10 values of 2,048 "é" (each within the value limit): 422 INVALID_INPUT naming the query and its encoded size, nothing sent', async () => {
    const query: Record<string, string> = {};
    for (let i = 0; i < 10; i++) query[`k${i}`] = 'é'.repeat(2048);
    const from = h.emu.requests.length;
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/search', query });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'INVALID_INPUT' });
    expect(res.body.toolResult.content).toMatch(new RegExp(`query: the request URL would be \\d+ characters once percent-encoded \\(path and query\\), over the ${NANGO_TARGET_MAX}`));
    expect(h.emu.requests.slice(from)).toHaveLength(0);
    expect((await rowOf(h, res.body.toolCallId)).started_at).toBeNull();
  });

  it('a long query under the limit still goes through', async () => {
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/search', query: { a: 'x'.repeat(2048), b: 'y'.repeat(2048), c: 'z'.repeat(2048) } });
    expect(res.body.status).toBe('succeeded');
  });
});
