import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDACTED } from '../../src/redaction/redaction.service.js';
import { call } from '../executor/support.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

/** Made-up values, none of them the suite's NAMED_TEST_SECRETS. */
const CVC = '8371';
const DB_PW = 'Zq9-prod-db-pw';
const OTP = '552903';
const SHPRT = 'shprt_7d0c5e2a9b8f4e1d3c6a5b4f2e1d0c9b';
const GATEWAY_KEY = 'tgw_Qm3x9Lw0pZr7Tn2Yv5Kd8Hs1Gf4Jc6Ba0Xe3Ui9Oq2N';
const LWA_BODY = 'IwEBIOrtjG3-cMo0xXr8Ab_QwQ';

/**
 * Secrets named by a short word inside a longer name (card[cvc], DB_PASS, otp_code), tokens of the formats
 * recognised by shape (Shopify refresh tokens, this gateway's own keys) right after an escape, and an IBAN, phones
 * and a card in a vendor's free text: what ops read with GET /v1/tool-calls/:id holds none of them, and keeps the
 * fields that merely look alike.
 */
describe('redaction: short secret words, token formats and output PII never reach what ops read', () => {
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

  async function story(toolCallId: unknown): Promise<Record<string, unknown>> {
    expect(toolCallId).toEqual(expect.any(String));
    const res = await h.t.http.get(`/v1/tool-calls/${toolCallId as string}`).set(bearer(opsKey));
    expect(res.status).toBe(200);
    return res.body as Record<string, unknown>;
  }

  it('inputRedacted: a Stripe card[cvc], DB_PASS in env text, otp_code, a shprt_ token and a tgw_ key after escapes', async () => {
    const body = {
      'card[number]': '4242424242424242',
      'card[cvc]': CVC,
      config: `DB_HOST=db\nDB_PASS=${DB_PW}`,
      otp_code: OTP,
      log: `rotated\\n${SHPRT}\\tagent key\\n${GATEWAY_KEY}`,
      callback: `https://app.example/cb?code=Atza%7C${LWA_BODY}&state=s1`,
      shipping_pin_code: '560001',
      passengers: 2,
    };
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: '/v1/charges', body });
    const row = await story((res.body as { toolCallId?: unknown }).toolCallId);
    const text = JSON.stringify(row.inputRedacted);
    expect([CVC, DB_PW, OTP, SHPRT, GATEWAY_KEY, LWA_BODY, '4242424242424242'].filter((s) => text.includes(s)), text).toEqual([]);
    expect(row.inputRedacted).toMatchObject({
      body: {
        'card[cvc]': REDACTED,
        config: `DB_HOST=db\nDB_PASS=${REDACTED}`,
        otp_code: REDACTED,
        log: `rotated\\n${REDACTED}\\tagent key\\n${REDACTED}`,
        callback: `https://app.example/cb?code=${REDACTED}&state=s1`,
        shipping_pin_code: '560001',
        passengers: 2,
      },
    });
  });

  it('outputRedacted: the same secrets in a vendor answer, and an IBAN, phones and a dotted card in its free text', async () => {
    const note = 'refund to DE89 3704 0044 0532 0130 00, call +44 (0)20 7946 0958 or 1-415-555-2671, card 4111.1111.1111.1111, order 1001 of 2026.08.02';
    h.emu.fault({
      vendor: 'nango',
      path: /\/proxy\//,
      kind: 'status',
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: { customer: { card_cvc: CVC, db: { DB_PASS: DB_PW }, note, token_note: `token ${SHPRT}`, order_id: '1001', cvc_check: 'pass' } },
    });
    let res;
    try {
      res = await call(h, org, 'nango_proxy', { action: 'get', path: '/v1/customers/1' });
    } finally {
      h.emu.clearFaults();
    }
    expect((res.body as { status?: string }).status).toBe('succeeded');
    const row = await story((res.body as { toolCallId?: unknown }).toolCallId);
    const text = JSON.stringify(row.outputRedacted);
    const leaked = [CVC, DB_PW, SHPRT, '0532 0130', '7946 0958', '555-2671', '4111.1111'].filter((s) => text.includes(s));
    expect(leaked, text).toEqual([]);
    expect(text).toContain(`refund to ${REDACTED}, call ${REDACTED} or ${REDACTED}, card ${REDACTED}, order 1001 of 2026.08.02`);
    expect(text).toContain('"order_id":"1001"');
    expect(text).toContain('"cvc_check":"pass"');
  });
});
