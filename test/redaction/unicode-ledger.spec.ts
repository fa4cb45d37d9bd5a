import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * Secrets and card numbers written with non-ASCII forms (a no-break space after the auth scheme, en dashes between a
 * card's groups, a no-break space after "password:") are redacted in the row the ledger keeps, as their ASCII spellings are.
 */
describe('redaction: non-ASCII spellings of a secret never reach tool_calls.input_redacted', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: ['shopify'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('an Authorization value after a no-break space, an en-dashed card and "password:\\u00a0…" are not in the row', async () => {
    const basic = Buffer.from('client-id:client-secret-0123').toString('base64');
    const card = '4111\u20131111\u20131111\u20131111';
    const input = { action: 'lookup', orderId: '1001', note: `Authorization: Basic\u00a0${basic}`, memo: `card ${card}`, extra: 'password:\u00a0hunter2secret' };
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', input));
    expect(res.status).toBeLessThan(500);
    const rows = (await h.t.ds.query('SELECT input_redacted FROM tool_calls WHERE id = $1', [res.body.toolCallId])) as { input_redacted: unknown }[];
    expect(rows).toHaveLength(1);
    const row = JSON.stringify(rows[0]);
    expect(row).not.toContain(basic);
    expect(row).not.toContain(card);
    expect(row).not.toContain('hunter2secret');
    expect(row).toContain('[REDACTED]');
  });
});
