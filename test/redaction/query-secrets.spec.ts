import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDACTED } from '../../src/redaction/redaction.service.js';
import { call } from '../executor/support.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

const TOKEN = 'nango-query-token-5f0c9e2a71d4';

/**
 * A credential the model writes into a path's query string is data like any other
 * string: the ledger, and so what ops read, must never hold it.
 */
describe('redaction: a secret in a path’s query string never reaches the ledger', () => {
  let h: Harness;
  let org: OrgSetup;
  let opsKey: string;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['nango_proxy.get', 'nango_proxy.post'], vendors: ['nango'] });
    opsKey = (await createKey(h.t, org.orgId, 'ops')).key;
  });
  afterAll(async () => {
    await h?.close();
  });

  it('nango_proxy.get with path "v1/x?access_token=…": GET /v1/tool-calls/:id shows the parameter, not the token', async () => {
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: `v1/x?access_token=${TOKEN}` });
    const id = (res.body as { toolCallId: string }).toolCallId;
    expect(id).toEqual(expect.any(String));

    const story = await h.t.http.get(`/v1/tool-calls/${id}`).set(bearer(opsKey));
    expect(story.status).toBe(200);
    expect(story.body.inputRedacted).toMatchObject({ path: `v1/x?access_token=${REDACTED}` });
    expect(JSON.stringify(story.body)).not.toContain(TOKEN);
  });

  it('nango_proxy.post creating a customer with a tax id and an SSN (any spelling, no dashes): what ops read holds neither', async () => {
    const body = { name: 'Acme', tax_id: '123456789', social_security_number: '078051120', taxpayerId: '987654321', ssn_spaced: 'ssn 219 09 9999' };
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: '/v1/customers', body });
    const id = (res.body as { toolCallId: string }).toolCallId;
    expect(id).toEqual(expect.any(String));

    const story = await h.t.http.get(`/v1/tool-calls/${id}`).set(bearer(opsKey));
    expect(story.status).toBe(200);
    expect(story.body.inputRedacted).toMatchObject({
      path: '/v1/customers',
      body: { name: 'Acme', tax_id: REDACTED, social_security_number: REDACTED, taxpayerId: REDACTED, ssn_spaced: REDACTED },
    });
    for (const v of ['123456789', '078051120', '987654321', '219 09 9999']) expect(JSON.stringify(story.body)).not.toContain(v);
  });
});
