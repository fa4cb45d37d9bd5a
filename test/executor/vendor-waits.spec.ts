import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../../src/catalog/tool-catalog.service.js';
import { Clock } from '../../src/common/clock.js';
import type { AppConfig } from '../../src/config/app-config.js';
import type { MetricsService } from '../../src/metrics/metrics.service.js';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';
import { RuntimeToolExecutor } from '../../src/executor/runtime-tool-executor.js';
import { AmazonHandler } from '../../src/vendors/amazon/amazon.handler.js';
import { JumioHandler } from '../../src/vendors/jumio/jumio.handler.js';
import { NangoHandler } from '../../src/vendors/nango/nango.handler.js';
import { emulatorEndpoints } from '../../src/vendors/handler.spec-support.js';
import type { VendorHandler } from '../../src/vendors/vendor-handler.js';
import { fixedCredentials } from './fixed-credentials.js';

/**
 * The waits vendors name (Retry-After on 429 and 5xx) and the breaker's view of them, through the executor and
 * the real Jumio, SP-API and Nango handlers against a scripted HTTP server.
 */

const metrics = {
  onScrape: () => undefined,
  breakerState: { reset: () => undefined, set: () => undefined },
  vendorLatency: { observe: () => undefined },
} as unknown as MetricsService;

type Vendor = 'jumio' | 'amazon' | 'nango';
const CREDS: Record<Vendor, Record<string, unknown>> = {
  jumio: { clientId: 'cid', clientSecret: 'csecret', region: 'amer-1', accountId: 'a1b2c3d4-0000-4c5d-8e9f-0000000000aa' },
  amazon: { clientId: 'cid', clientSecret: 'csecret', refreshToken: 'Atzr|refresh', region: 'na' },
  nango: { secretKey: 'sk-test-123456', connectionId: 'conn-1', providerConfigKey: 'github' },
};
// The run-wide leak scan looks for these too ('csecret' is shorter than the 8 characters a needle needs).
recordMintedSecret('vendor-waits.spec Amazon refresh token', CREDS.amazon.refreshToken as string);
recordMintedSecret('vendor-waits.spec Nango secret key', CREDS.nango.secretKey as string);
const WFID = 'a1b2c3d4-0000-4c5d-8e9f-000000000003';
const ORDER = '112-0000001-1234567';
const PARAMS: Record<Vendor, Record<string, unknown>> = {
  jumio: { workflowExecutionId: WFID, includeDetails: false },
  amazon: { orderId: ORDER },
  nango: { path: '/repos/x' },
};
const OK_BODY: Record<Vendor, unknown> = {
  jumio: { workflowExecution: { status: 'INITIATED' } },
  amazon: { payload: { AmazonOrderId: ORDER, OrderStatus: 'Shipped' } },
  nango: { fine: true },
};

type Script = (res: http.ServerResponse, n: number) => void;
let script: Script;
/** Answers the token endpoints; by default a fresh token. */
let tokenScript: Script | undefined;
let hits: number[] = [];
let tokenHits = 0;
let server: http.Server;
let url: string;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path === '/oauth2/token' || path === '/auth/o2/token') {
      tokenHits++;
      if (tokenScript) tokenScript(res, tokenHits);
      else {
        const token = `tok-${randomBytes(24).toString('base64url')}`;
        recordMintedSecret('vendor-waits.spec token server', token); // the run-wide leak scan looks for it too
        json(res, 200, { access_token: token, expires_in: 3600, token_type: 'Bearer' });
      }
      return;
    }
    hits.push(performance.now());
    script(res, hits.length);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});
beforeEach(() => {
  hits = [];
  tokenHits = 0;
  tokenScript = undefined;
});

function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function exec(vendor: Vendor, over: Partial<AppConfig> = {}, clock = new Clock()) {
  const config = {
    VENDOR_TIMEOUT_MS: 5_000,
    VENDOR_MAX_RETRIES: 3,
    VENDOR_RETRY_AFTER_CAP_MS: 2_000,
    CIRCUIT_BREAKER_THRESHOLD: 5,
    CIRCUIT_BREAKER_COOLDOWN_MS: 1_000,
    ...over,
  } as AppConfig;
  const endpoints = emulatorEndpoints(url, { timeoutMs: config.VENDOR_TIMEOUT_MS, connectTimeoutMs: 500, userAgent: 'test/1.0' });
  const handler: VendorHandler = vendor === 'jumio' ? new JumioHandler(endpoints) : vendor === 'amazon' ? new AmazonHandler(endpoints) : new NangoHandler(endpoints);
  const credentials = fixedCredentials(CREDS[vendor]);
  const ex = new RuntimeToolExecutor(config, credentials, clock, metrics);
  const tool = handler.tools[0];
  const action = vendor === 'nango' ? tool.actions.find((a) => a.name === 'get')! : tool.actions[0];
  const entry = { tool, action, vendor, handler, key: `${tool.name}.${action.name}` } as CatalogEntry;
  const run = () => ex.execute({ entry, orgId: 'org-1', toolCallId: 't1', idempotencyKey: 'k1', params: PARAMS[vendor] });
  return { ex, run, breaker: () => ex.breakerFor('org-1', vendor) };
}

const VENDORS: Vendor[] = ['jumio', 'amazon', 'nango'];

describe('Retry-After on a 5xx (how long the vendor expects to be unavailable, RFC 9110 §10.2.3)', () => {
  for (const vendor of VENDORS) {
    it(`${vendor}: 503 + Retry-After: 1 → the retry waits at least a second, then succeeds`, async () => {
      script = (res, n) => (n === 1 ? json(res, 503, {}, { 'retry-after': '1' }) : json(res, 200, OK_BODY[vendor]));
      const out = await exec(vendor).run();
      expect(out.status).toBe('succeeded');
      expect(hits.length).toBe(2);
      expect(hits[1] - hits[0]).toBeGreaterThanOrEqual(950);
      expect(out.retries).toEqual([expect.objectContaining({ reason: 'server_error' })]);
    });

    it(`${vendor}: 503 + Retry-After: 600 (past the cap) → one request, VENDOR_ERROR at once`, async () => {
      script = (res) => json(res, 503, {}, { 'retry-after': '600' });
      const t0 = performance.now();
      // A budget longer than the bound below: a wait cut short at the budget would not pass for "at once" either.
      const out = await exec(vendor, { VENDOR_TIMEOUT_MS: 40_000 }).run();
      expect(out).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR', vendorStatus: 503, retries: [] });
      expect(out).not.toHaveProperty('retryAfterSeconds');
      expect(hits.length).toBe(1);
      expect(performance.now() - t0).toBeLessThan(30_000); // the waits ruled out are 600 s and the 40 s budget; a loaded machine takes far less
    });
  }

  it('jumio: 503 + Retry-After in the RFC 850 form two seconds out → retried no sooner', async () => {
    const when = new Date(Date.now() + 2_000);
    const days = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
    const [, d, m, y, t] = when.toUTCString().split(' ');
    const rfc850 = `${days[when.getUTCDay()]}, ${d}-${m}-${y.slice(2)} ${t} GMT`;
    script = (res, n) => (n === 1 ? json(res, 503, {}, { 'retry-after': rfc850 }) : json(res, 200, OK_BODY.jumio));
    const out = await exec('jumio').run();
    expect(out.status).toBe('succeeded');
    // The date has whole seconds: at least a second of the two.
    expect(hits[1] - hits[0]).toBeGreaterThanOrEqual(900);
  });
});

describe('retryAfterSeconds only when the vendor said how long to wait (API.md)', () => {
  it('jumio 429 without Retry-After: retried after its slot, then VENDOR_RATE_LIMITED without retryAfterSeconds', async () => {
    script = (res) => json(res, 429, { title: 'Too Many Requests', status: 429 });
    const out = await exec('jumio').run();
    expect(out).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' });
    expect(out).not.toHaveProperty('retryAfterSeconds');
    expect(hits.length).toBe(4);
    // Each retry still waited Jumio's slot of 67 ms.
    expect(out.retries.every((r) => r.delayMs >= 67)).toBe(true);
    // A wait Jumio does name (past the cap) is handed back.
    hits = [];
    script = (res) => json(res, 429, {}, { 'retry-after': '5' });
    expect(await exec('jumio').run()).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED', retryAfterSeconds: 5 });
    expect(hits.length).toBe(1);
  });

  it('SP-API 429 QuotaExceeded (no Retry-After): its 1/rate wait is not reported as the vendor\'s', async () => {
    script = (res) => json(res, 429, { errors: [{ code: 'QuotaExceeded', message: 'You exceeded your quota for the requested resource.' }] });
    const out = await exec('amazon', { VENDOR_TIMEOUT_MS: 1_500 }).run();
    expect(out).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' });
    expect(out).not.toHaveProperty('retryAfterSeconds');
    expect(hits.length).toBe(1); // 2 s (0.5/s) does not fit the 1.5 s budget
  });

  it('LWA token endpoint 429 without Retry-After: no retryAfterSeconds; with one, it is reported', async () => {
    script = (res) => json(res, 200, OK_BODY.amazon);
    tokenScript = (res) => json(res, 429, { error: 'too_many_requests' });
    const bare = await exec('amazon', { VENDOR_MAX_RETRIES: 0 }).run();
    expect(bare).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' });
    expect(bare).not.toHaveProperty('retryAfterSeconds');
    tokenScript = (res) => json(res, 429, { error: 'too_many_requests' }, { 'retry-after': '30' });
    expect(await exec('amazon', { VENDOR_MAX_RETRIES: 0 }).run()).toMatchObject({ errorCode: 'VENDOR_RATE_LIMITED', retryAfterSeconds: 30 });
    expect(hits.length).toBe(0);
  });

  it('nango 429 without Retry-After: retried after a second, no retryAfterSeconds', async () => {
    script = (res) => json(res, 429, { error: { code: 'too_many_request' } });
    // A budget with room for the retry's answer after the second and its jitter: a quarter of it (a retry needs that).
    const out = await exec('nango', { VENDOR_TIMEOUT_MS: 2_000 }).run();
    expect(out).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' });
    expect(out).not.toHaveProperty('retryAfterSeconds');
    expect(hits.length).toBe(2);
    expect(hits[1] - hits[0]).toBeGreaterThanOrEqual(950);
  });
});

describe('the breaker and rate limits', () => {
  it('a half-open probe is one request, even for a retryable read; once the breaker closes, retries resume', async () => {
    const clock = new Clock();
    script = (res) => json(res, 503, {});
    const { run, breaker } = exec('jumio', { CIRCUIT_BREAKER_THRESHOLD: 1 }, clock);
    await run();
    expect(breaker().current).toBe('open');
    clock.advance(1_000);
    hits = [];
    expect(await run()).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR', retries: [] });
    expect(hits.length).toBe(1);
    expect(breaker().current).toBe('open');
    clock.advance(1_000);
    script = (res) => json(res, 200, OK_BODY.jumio);
    expect(await run()).toMatchObject({ status: 'succeeded' });
    expect(breaker().current).toBe('closed');
    script = (res, n) => (n % 2 === 1 ? json(res, 503, {}) : json(res, 200, OK_BODY.jumio));
    hits = [];
    expect(await run()).toMatchObject({ status: 'succeeded', retries: [expect.objectContaining({ reason: 'server_error' })] });
  });

  it('5xx and 429 alternating: the 429s do not reset the count, the breaker opens', async () => {
    let n = 0;
    script = (res) => (n++ % 2 === 0 ? json(res, 503, {}) : json(res, 429, {}, { 'retry-after': '600' }));
    const { run, breaker } = exec('jumio', { CIRCUIT_BREAKER_THRESHOLD: 2, VENDOR_MAX_RETRIES: 0 });
    const codes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const out = await run();
      codes.push(out.status === 'succeeded' ? 'ok' : out.errorCode);
    }
    expect(codes).toEqual(['VENDOR_ERROR', 'VENDOR_RATE_LIMITED', 'VENDOR_ERROR']);
    expect(breaker().current).toBe('open');
  });

  it('a half-open probe answered 429 does not close the breaker: the next call is the probe', async () => {
    const clock = new Clock();
    script = (res) => json(res, 503, {});
    const { run, breaker } = exec('jumio', { CIRCUIT_BREAKER_THRESHOLD: 1, VENDOR_MAX_RETRIES: 0 }, clock);
    await run();
    clock.advance(1_000);
    script = (res) => json(res, 429, {}, { 'retry-after': '600' });
    expect(await run()).toMatchObject({ errorCode: 'VENDOR_RATE_LIMITED', retryAfterSeconds: 600 });
    expect(breaker().current).toBe('half_open');
    script = (res) => json(res, 503, {});
    expect(await run()).toMatchObject({ errorCode: 'VENDOR_ERROR' });
    expect(breaker().current).toBe('open');
  });
});
