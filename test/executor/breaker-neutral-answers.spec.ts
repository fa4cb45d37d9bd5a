import 'reflect-metadata';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../../src/catalog/tool-catalog.service.js';
import { Clock } from '../../src/common/clock.js';
import type { AppConfig } from '../../src/config/app-config.js';
import { RuntimeToolExecutor } from '../../src/executor/runtime-tool-executor.js';
import type { MetricsService } from '../../src/metrics/metrics.service.js';
import { JumioHandler } from '../../src/vendors/jumio/jumio.handler.js';
import { refundCreateOutcome } from '../../src/vendors/shopify/shopify.outcomes.js';
import type { ToolActionSpec, VendorCallContext, VendorEndpoints, VendorHandler, VendorOutcome } from '../../src/vendors/vendor-handler.js';
import { fixedCredentials } from './fixed-credentials.js';

/**
 * Failures that say nothing against the vendor's health do not count against the org × vendor circuit breaker
 * (README: it counts 5xx, timeouts, network failures and answers it cannot read): calls a token endpoint's wait held
 * off (nothing was sent), and a refund Shopify answered readably whose payment transaction is ERROR (the payment
 * provider's trouble). Both still end as they must: VENDOR_RATE_LIMITED with the wait left; OUTCOME_UNKNOWN.
 */
const metrics = {
  onScrape: () => undefined,
  breakerState: { reset: () => undefined, set: () => undefined },
  vendorLatency: { observe: () => undefined },
} as unknown as MetricsService;

const config = (threshold: number) =>
  ({ VENDOR_TIMEOUT_MS: 2_000, VENDOR_MAX_RETRIES: 3, VENDOR_RETRY_AFTER_CAP_MS: 2_000, CIRCUIT_BREAKER_THRESHOLD: threshold, CIRCUIT_BREAKER_COOLDOWN_MS: 30_000 }) as AppConfig;

describe('a token endpoint 503 naming a Retry-After: the calls held off meanwhile', () => {
  let server: http.Server;
  let tokenRequests = 0;
  let base = '';
  beforeAll(async () => {
    server = http.createServer((rq, rs) => {
      if (rq.url === '/oauth2/token') {
        tokenRequests++;
        rs.writeHead(503, { 'Retry-After': '30', 'Content-Type': 'application/json' });
        rs.end('{}');
        return;
      }
      rs.writeHead(200, { 'Content-Type': 'application/json' });
      rs.end('{"workflowExecution":{"status":"INITIATED"}}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('are answered VENDOR_RATE_LIMITED with the wait left, send nothing, and do not open the breaker', async () => {
    const creds = fixedCredentials({ clientId: 'wait-client', clientSecret: 'wait-secret', region: 'amer-1', accountId: '0b7a6c5d-1e2f-4a3b-8c9d-0e1f2a3b4c5d' });
    const ex = new RuntimeToolExecutor(config(3), creds, new Clock(), metrics);
    const handler = new JumioHandler({ jumioAuthBaseUrl: base, jumioRetrievalBaseUrl: base, timeoutMs: 2_000, connectTimeoutMs: 1_000, maxResponseBytes: 1 << 20, userAgent: 'test' } as VendorEndpoints);
    const entry = { tool: handler.tools[0], action: handler.tools[0].actions[0], vendor: 'jumio', handler, key: 'kyc.get_status' } as unknown as CatalogEntry;
    const orgId = 'org-token-503-wait';
    const run = (i: number) => ex.execute({ entry, orgId, toolCallId: `t${i}`, idempotencyKey: `k${i}`, params: { workflowExecutionId: '1a2b3c4d-0000-4c5d-8e9f-000000000001' } });

    // The 503 itself: a vendor failure (30 s is past the cap: not slept on), and it counts, once.
    expect(await run(0)).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
    for (let i = 1; i <= 3; i++) {
      const out = await run(i);
      expect(out, JSON.stringify(out)).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' });
      expect(out.status === 'failed' && out.retryAfterSeconds).toBeGreaterThanOrEqual(25);
    }
    expect(tokenRequests).toBe(1); // nothing else was sent
    expect(ex.breakerFor(orgId, 'jumio').current).toBe('closed'); // threshold 3: only the 503 counted
  });
});

describe('a refund answered readably with its payment transaction in ERROR', () => {
  const answer = {
    ok: true as const,
    vendorStatus: 200,
    data: {
      refundCreate: {
        refund: {
          id: 'gid://shopify/Refund/9001',
          totalRefundedSet: { presentmentMoney: { amount: '10.00', currencyCode: 'USD' } },
          transactions: { nodes: [{ id: 'gid://shopify/OrderTransaction/1', status: 'ERROR', kind: 'REFUND', gateway: 'bogus' }] },
        },
        userErrors: [],
      },
    },
  };
  function entry(name: string, spec: Partial<ToolActionSpec>, handle: (ctx: VendorCallContext) => Promise<VendorOutcome>): CatalogEntry {
    const action: ToolActionSpec = { name, description: '', inputSchema: {}, riskLevel: 'high', sideEffect: 'read', idempotent: true, costCents: 0, ...spec };
    const handler: VendorHandler = { vendor: 'shopify', tools: [], execute: handle };
    return { tool: { name: 'shopify_refund', vendor: 'shopify', description: '', actions: [action] }, action, vendor: 'shopify', handler, key: `x.${name}` } as CatalogEntry;
  }

  it('is OUTCOME_UNKNOWN, and two of them (threshold 2) leave the org\'s Shopify calls running', async () => {
    const ex = new RuntimeToolExecutor(config(2), fixedCredentials({ shopDomain: 'x.myshopify.com' }), new Clock(), metrics);
    const refund = entry('create', { sideEffect: 'write', overwrite: false }, async (ctx) => refundCreateOutcome(ctx, answer));
    const read = entry('lookup', {}, async () => ({ ok: true, data: { fine: true }, vendorStatus: 200 }));
    const orgId = 'org-refund-error-breaker';
    for (let i = 0; i < 2; i++) {
      expect(await ex.execute({ entry: refund, orgId, toolCallId: `r${i}`, idempotencyKey: `rk${i}`, params: { orderId: '1001' } })).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    }
    expect(ex.breakerFor(orgId, 'shopify').current).toBe('closed');
    expect((await ex.execute({ entry: read, orgId, toolCallId: 'l1', idempotencyKey: 'lk1', params: {} })).status).toBe('succeeded');
  });
});
