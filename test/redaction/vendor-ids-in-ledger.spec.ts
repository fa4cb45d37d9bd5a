import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../executor/support.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

/**
 * Vendor ids a model writes into nango_proxy params, as ops read them back in GET /v1/tool-calls/:id: a Shopify REST
 * path's id before ".json" and an EAN-13 searched in SP-API's catalog are kept as written (each was cut one time in
 * ten, as a 13-digit Visa number), and what the provider answered with them too.
 */
describe('vendor ids in the ledger', () => {
  let h: Harness;
  let org: OrgSetup;
  let opsKey: string;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['nango_proxy.get'], vendors: ['nango'] });
    opsKey = (await createKey(h.t, org.orgId, 'ops')).key;
  });
  afterAll(async () => {
    await h?.close();
  });

  async function story(input: Record<string, unknown>) {
    const res = await call(h, org, 'nango_proxy', input);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const id = (res.body as { toolCallId: string }).toolCallId;
    const s = await h.t.http.get(`/v1/tool-calls/${id}`).set(bearer(opsKey));
    expect(s.status).toBe(200);
    return s.body as { inputRedacted: Record<string, unknown>; outputRedacted: unknown };
  }

  it.each([
    ['a product', '/admin/api/2026-07/products/4231260082919.json'],
    ['a variant', '/admin/api/2026-07/variants/38369860837165.json'],
  ])('a Shopify REST path of %s keeps its id', async (_what, path) => {
    const s = await story({ action: 'get', path });
    expect(s.inputRedacted).toMatchObject({ path });
  });

  it('an EAN-13 searched in the SP-API catalog is kept in the query and in the answer', async () => {
    const query = { identifiers: '4195618091031', identifiersType: 'EAN', marketplaceIds: 'A1PA6795UKMFR9' };
    const s = await story({ action: 'get', path: '/catalog/2022-04-01/items', query });
    expect(s.inputRedacted).toMatchObject({ query });
    expect(JSON.stringify(s.outputRedacted)).toContain('4195618091031');
  });
});
