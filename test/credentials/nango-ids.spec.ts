import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CREDENTIALS, setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { call } from '../executor/support.js';

/**
 * Nango's ids (its server's validation.ts): connectionId /^[a-zA-Z0-9,.;:=+~[\]|@${}"'\\/_ -]+$/ (e-mail addresses,
 * paths), providerConfigKey /^[a-zA-Z0-9~:.@ _-]+$/, at most 255 characters each. The PUT takes what Nango takes,
 * and the Nango handler sends it as is; a leading or trailing blank, which the handler's header check refuses, is
 * refused at the PUT, without echoing the value.
 */
describe('nango credentials: the ids Nango accepts', () => {
  let h: Harness;
  let org: OrgSetup;
  const url = () => `/v1/orgs/${org.orgId}/integrations/nango/credentials`;
  const put = (config: Record<string, unknown>) => h.t.http.put(url()).set(bearer(org.adminKey)).send({ config });

  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['nango_proxy.get'], vendors: ['nango'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  it.each([
    ['connectionId', 'ops+acme@example.com'],
    ['connectionId', 'tenant/42'],
    ['connectionId', 'user 42'],
    ['connectionId', `a[1]{2}|$;=,"'\\~:x`],
    ['providerConfigKey', 'hubspot prod'],
    ['providerConfigKey', 'hubspot~eu'],
  ] as const)('%s %j → 200, and a nango_proxy.get sends it as the header', async (field, value) => {
    const res = await put({ ...CREDENTIALS.nango, [field]: value });
    expect([res.status, res.body.detail]).toEqual([200, undefined]);
    const before = h.emu.requests.length;
    await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/notes' });
    const sent = h.emu.requests.slice(before).filter((r) => r.vendor === 'nango');
    expect(sent).toHaveLength(1);
    expect(sent[0].headers[field === 'connectionId' ? 'connection-id' : 'provider-config-key']).toBe(value);
  });

  it.each(['connectionId', 'providerConfigKey'] as const)('%s of 255 characters → 200, of 256 → 400', async (field) => {
    expect((await put({ ...CREDENTIALS.nango, [field]: 'k'.repeat(255) })).status).toBe(200);
    const res = await put({ ...CREDENTIALS.nango, [field]: 'k'.repeat(256) });
    expect([res.status, res.body.code, res.body.detail]).toEqual([400, 'VALIDATION_FAILED', `config.${field}: must NOT have more than 255 characters`]);
  });

  it.each([
    ['connectionId', ' lead-q7'],
    ['connectionId', 'trail-q7 '],
    ['connectionId', 'ctl-q7\u0007x'],
    ['connectionId', 'tab-q7\tx'],
    ['providerConfigKey', ' lead-q7'],
    ['providerConfigKey', 'trail-q7 '],
    ['providerConfigKey', 'ctl-q7\u0001x'],
    ['providerConfigKey', 'slash-q7/x'],
  ] as const)('%s %j → 400 naming the field, not the value', async (field, value) => {
    const res = await put({ ...CREDENTIALS.nango, [field]: value });
    expect([res.status, res.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    expect(res.body.detail).toMatch(new RegExp(`^config\\.${field}: `));
    expect(res.text).not.toContain('-q7');
  });
});
