import { request } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TokenCache } from '../vendors/auth/token-cache.js';
import { AmazonHandler } from '../vendors/amazon/amazon.handler.js';
import { callContext, emulatorEndpoints, TEST_USER_AGENT } from '../vendors/handler.spec-support.js';
import { AMAZON_EMULATOR_CREDENTIALS, AmazonEmulator } from './amazon.emulator.js';
import { AMAZON_ORDER_IDS } from './amazon.fixtures.js';
import { VendorEmulator } from './vendor-emulator.js';

/**
 * SP-API calls must carry a User-Agent (VENDORS.md §2.1, §2.5): the emulator refuses one without, so the
 * gateway's SP-API client is proven to send it. LWA (another host, api.amazon.com) is not part of this.
 */
let emu: VendorEmulator;
let url: string;

async function token(): Promise<string> {
  const c = AMAZON_EMULATOR_CREDENTIALS;
  const body = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: c.refreshToken, client_id: c.clientId, client_secret: c.clientSecret });
  const res = await fetch(`${url}/auth/o2/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
  return ((await res.json()) as { access_token: string }).access_token;
}

/** A GET through node:http, which (unlike fetch) sends no User-Agent of its own: only `headers` go out. */
function rawGet(path: string, headers: Record<string, string>): Promise<{ status: number; body: { errors?: { code: string; message: string; details: string }[] } }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method: 'GET', headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end();
  });
}

const PATHS = [
  `/orders/v0/orders/${AMAZON_ORDER_IDS.shipped}`,
  `/orders/v0/orders/${AMAZON_ORDER_IDS.shipped}/orderItems`,
  `/orders/2026-01-01/orders/${AMAZON_ORDER_IDS.shipped}?includedData=BUYER`,
];
const MISSING = { status: 400, body: { errors: [{ code: 'InvalidInput', message: 'Invalid Input', details: 'User-Agent header is required.' }] } };

beforeAll(async () => {
  emu = new VendorEmulator([new AmazonEmulator()]);
  url = await emu.start();
});
afterAll(() => emu.stop());
beforeEach(() => emu.reset());

describe('emulated SP-API: the User-Agent header', () => {
  it.each(PATHS)('%s without a User-Agent → 400 InvalidInput (ErrorList shape), even with a valid token', async (path) => {
    const t = await token();
    const res = await rawGet(path, { 'x-amz-access-token': t });
    expect(res).toEqual(MISSING);
    // The same request with one is answered.
    expect((await rawGet(path, { 'x-amz-access-token': t, 'user-agent': 'Acme/1.0 (Language=Node/20)' })).status).toBe(200);
  });

  it('an empty or blank User-Agent is no User-Agent', async () => {
    const t = await token();
    for (const agent of ['', '   ']) expect(await rawGet(PATHS[0], { 'x-amz-access-token': t, 'user-agent': agent }), JSON.stringify(agent)).toEqual(MISSING);
  });

  it('is checked before the token: no header and no token → the User-Agent refusal, not 403', async () => {
    expect(await rawGet(PATHS[0], {})).toEqual(MISSING);
  });

  it('at most 500 characters (the documented limit)', async () => {
    const t = await token();
    expect((await rawGet(PATHS[0], { 'x-amz-access-token': t, 'user-agent': 'a'.repeat(500) })).status).toBe(200);
    const long = await rawGet(PATHS[0], { 'x-amz-access-token': t, 'user-agent': 'a'.repeat(501) });
    expect(long).toMatchObject({ status: 400, body: { errors: [{ code: 'InvalidInput', details: 'User-Agent header is longer than 500 characters.' }] } });
  });

  it.each([
    ['v0', {}],
    ['2026-01-01', { amazonOrdersApi: '2026-01-01' as const }],
  ])("the gateway's own SP-API client (Orders %s) sends one and is answered", async (_api, overrides) => {
    const handler = new AmazonHandler(emulatorEndpoints(url, overrides), new TokenCache());
    const credentials = { ...AMAZON_EMULATOR_CREDENTIALS, region: 'na', marketplaceId: 'ATVPDKIKX0DER' };
    for (const action of ['get_order', 'get_order_items']) {
      const out = await handler.execute(callContext({ toolName: 'amazon_query', action, params: { orderId: AMAZON_ORDER_IDS.paged }, credentials }));
      expect(out, action).toMatchObject({ ok: true, vendorStatus: 200 });
    }
    const spapi = emu.requests.filter((r) => r.path.startsWith('/orders/'));
    expect(spapi.length).toBeGreaterThanOrEqual(2);
    for (const r of spapi) expect(r.headers['user-agent'], r.path).toBe(TEST_USER_AGENT);
  });
});
