import 'reflect-metadata';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../../src/catalog/tool-catalog.service.js';
import { Clock } from '../../src/common/clock.js';
import type { AppConfig } from '../../src/config/app-config.js';
import type { MetricsService } from '../../src/metrics/metrics.service.js';
import { RuntimeToolExecutor } from '../../src/executor/runtime-tool-executor.js';
import { AmazonHandler } from '../../src/vendors/amazon/amazon.handler.js';
import { emulatorEndpoints } from '../../src/vendors/handler.spec-support.js';
import { JumioHandler } from '../../src/vendors/jumio/jumio.handler.js';
import { NangoHandler } from '../../src/vendors/nango/nango.handler.js';
import { ShopifyHandler } from '../../src/vendors/shopify/shopify.handler.js';
import type { VendorHandler } from '../../src/vendors/vendor-handler.js';
import { fixedCredentials } from './fixed-credentials.js';

/**
 * Vendor answers that are well-formed HTTP yet hostile to the gateway: a token endpoint handing out an access
 * token that cannot be sent as a header (it must not be cached: every call of the org would fail until its expiry),
 * a request that cannot be built (never sent: not a network failure, not retried, not held against the breaker),
 * and a JSON answer starting with a UTF-8 byte order mark (RFC 8259 §8.1; WHATWG fetch strips it).
 */

const metrics = {
  onScrape: () => undefined,
  breakerState: { reset: () => undefined, set: () => undefined },
  vendorLatency: { observe: () => undefined },
} as unknown as MetricsService;

const CONFIG = {
  VENDOR_TIMEOUT_MS: 3_000,
  VENDOR_MAX_RETRIES: 2,
  VENDOR_RETRY_AFTER_CAP_MS: 2_000,
  CIRCUIT_BREAKER_THRESHOLD: 2,
  CIRCUIT_BREAKER_COOLDOWN_MS: 60_000,
} as AppConfig;

const WFID = 'a1b2c3d4-0000-4c5d-8e9f-000000000003';
const ORDER = '112-0000001-1234567';

interface Case {
  vendor: 'jumio' | 'amazon' | 'shopify';
  handler: (endpoints: ReturnType<typeof emulatorEndpoints>) => VendorHandler;
  tool: string;
  creds: Record<string, unknown>;
  params: Record<string, unknown>;
  ok: unknown;
  badToken: string;
  goodToken: (n: number) => string;
}

const TOKEN_CASES: Case[] = [
  {
    vendor: 'jumio',
    handler: (e) => new JumioHandler(e),
    tool: 'kyc',
    creds: { clientId: 'cid', clientSecret: 'csecret', region: 'amer-1', accountId: 'a1b2c3d4-0000-4c5d-8e9f-0000000000aa' },
    params: { workflowExecutionId: WFID, includeDetails: false },
    ok: { workflowExecution: { status: 'INITIATED' } },
    badToken: 'tok-bad\r\nx-injected: 1',
    goodToken: (n) => `eyJhbGciOiJSUzI1NiJ9.good-${n}.sig`,
  },
  {
    vendor: 'amazon',
    handler: (e) => new AmazonHandler(e),
    tool: 'amazon_query',
    creds: { clientId: 'cid', clientSecret: 'csecret', refreshToken: 'Atzr|refresh-hv', region: 'na' },
    params: { orderId: ORDER },
    ok: { payload: { AmazonOrderId: ORDER, OrderStatus: 'Shipped' } },
    badToken: `Atza|${'x'.repeat(9_000)}`, // absurdly long: no server takes a header line that size
    goodToken: (n) => `Atza|good-${n}-abcdefgh`,
  },
  {
    vendor: 'shopify',
    handler: (e) => new ShopifyHandler(e),
    tool: 'order_lookup',
    creds: { shopDomain: 'acme.myshopify.com', clientId: 'cid-shop', clientSecret: 'csecret-shop' },
    params: { orderId: '1001' },
    ok: { data: { order: { id: 'gid://shopify/Order/1001', name: '#1001' } } },
    badToken: 'shpat_bad\r\nx-injected: 1',
    goodToken: (n) => `shpat_good${n}abcdefgh`,
  },
];

const TOKEN_PATHS = new Set(['/oauth2/token', '/auth/o2/token', '/admin/oauth/access_token']);
let answer: (res: http.ServerResponse) => void;
let token: (n: number) => string;
let hits = 0;
let tokenHits = 0;
let server: http.Server;
let url: string;

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    if (TOKEN_PATHS.has((req.url ?? '').split('?')[0])) {
      tokenHits++;
      json(res, 200, { access_token: token(tokenHits), expires_in: 3600, token_type: 'Bearer' });
      return;
    }
    hits++;
    answer(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});
beforeEach(() => {
  hits = 0;
  tokenHits = 0;
  token = (n) => `tok-${n}-abcdefgh`;
});

function executor(handler: VendorHandler, vendor: CatalogEntry['vendor'], toolName: string, action: string, creds: Record<string, unknown>) {
  const ex = new RuntimeToolExecutor(CONFIG, fixedCredentials(creds), new Clock(), metrics);
  const tool = handler.tools.find((t) => t.name === toolName)!;
  const act = tool.actions.find((a) => a.name === action) ?? tool.actions[0];
  const entry = { tool, action: act, vendor, handler, key: `${tool.name}.${act.name}` } as CatalogEntry;
  const run = (params: Record<string, unknown>) => ex.execute({ entry, orgId: 'org-1', toolCallId: 't1', idempotencyKey: 'k1', params });
  return { run, breaker: () => ex.breakerFor('org-1', vendor) };
}

function endpoints(userAgent = 'test/1.0') {
  return emulatorEndpoints(url, { timeoutMs: CONFIG.VENDOR_TIMEOUT_MS, connectTimeoutMs: 500, userAgent, maxResponseBytes: 64 * 1024 });
}

describe('a token endpoint answering an access token that cannot be sent as a header', () => {
  for (const c of TOKEN_CASES) {
    it(`${c.vendor}: refused and not cached: once the token endpoint is fixed, the next call succeeds`, async () => {
      answer = (res) => json(res, 200, c.ok);
      token = (n) => (n === 1 ? c.badToken : c.goodToken(n));
      const { run, breaker } = executor(c.handler(endpoints()), c.vendor, c.tool, 'get', c.creds);
      const first = await run(c.params);
      expect(first).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR', retries: [] });
      expect((first as { errorText: string }).errorText).toMatch(/access token that cannot be sent as a header/);
      expect((first as { errorText: string }).errorText).not.toContain('injected');
      expect({ hits, tokenHits }).toEqual({ hits: 0, tokenHits: 1 }); // nothing reached the API; not retried
      // The same handler (its token cache) serves the next call: a fresh token is fetched and used.
      const second = await run(c.params);
      expect({ status: second.status, tokenHits, hits }).toEqual({ status: 'succeeded', tokenHits: 2, hits: 1 });
      expect(breaker().current).toBe('closed');
    });
  }
});

describe('a request that cannot be built (a header value Node refuses)', () => {
  it('fails at once as VENDOR_ERROR: never sent, not retried, not held against the breaker', async () => {
    answer = (res) => json(res, 200, { ok: true });
    const { run, breaker } = executor(
      new NangoHandler(endpoints('gateway/1.0\r\nx-injected: 1')),
      'nango',
      'nango_proxy',
      'get',
      { secretKey: 'sk-test-hostile-1', connectionId: 'conn-1', providerConfigKey: 'github' },
    );
    // Past the breaker's threshold (2): each is still the same failure, never CIRCUIT_OPEN.
    for (let i = 0; i < 3; i++) {
      const out = await run({ path: '/repos/x' });
      expect(out).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR', retries: [], vendorReached: false });
      expect((out as { errorText: string }).errorText).toMatch(/could not be built \(invalid header\)/);
    }
    expect(hits).toBe(0);
    expect(breaker().current).toBe('closed');
  });
});

describe('a JSON answer that starts with a UTF-8 byte order mark is read as the JSON it is', () => {
  const bom = (body: string) => (res: http.ServerResponse) => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
    res.end(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(body)]));
  };
  const nangoCreds = { secretKey: 'sk-test-hostile-1', connectionId: 'conn-1', providerConfigKey: 'github' };

  it('nango get', async () => {
    answer = bom('{"id":42,"done":true}');
    const { run } = executor(new NangoHandler(endpoints()), 'nango', 'nango_proxy', 'get', nangoCreds);
    expect(await run({ path: '/repos/x' })).toMatchObject({ status: 'succeeded', result: { id: 42, done: true } });
  });

  it('nango post: succeeded, not indeterminate', async () => {
    answer = bom('{"id":42,"done":true}');
    const { run } = executor(new NangoHandler(endpoints()), 'nango', 'nango_proxy', 'post', nangoCreds);
    expect(await run({ path: '/repos/x', body: { a: 1 } })).toMatchObject({ status: 'succeeded', result: { id: 42, done: true } });
    expect(hits).toBe(1);
  });

  it('jumio get_status', async () => {
    answer = bom('{"workflowExecution":{"status":"INITIATED"}}');
    const c = TOKEN_CASES[0];
    const { run } = executor(c.handler(endpoints()), 'jumio', c.tool, 'get', c.creds);
    expect(await run(c.params)).toMatchObject({ status: 'succeeded' });
  });
});
