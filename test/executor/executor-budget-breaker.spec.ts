import 'reflect-metadata';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CatalogEntry } from '../../src/catalog/tool-catalog.service.js';
import { Clock } from '../../src/common/clock.js';
import type { AppConfig } from '../../src/config/app-config.js';
import type { CredentialsService } from '../../src/credentials/credentials.service.js';
import type { MetricsService } from '../../src/metrics/metrics.service.js';
import { RuntimeToolExecutor } from '../../src/executor/runtime-tool-executor.js';
import type { ToolActionSpec, VendorCallContext, VendorHandler, VendorOutcome } from '../../src/vendors/vendor-handler.js';

const metrics = {
  onScrape: () => undefined,
  breakerState: { reset: () => undefined, set: () => undefined },
  vendorLatency: { observe: () => undefined },
} as unknown as MetricsService;
const credentials = { load: async () => ({ any: 'thing' }) } as unknown as CredentialsService;

function executor(over: Partial<AppConfig> = {}, clock = new Clock()): RuntimeToolExecutor {
  const config = {
    VENDOR_TIMEOUT_MS: 350,
    VENDOR_MAX_RETRIES: 10,
    VENDOR_RETRY_AFTER_CAP_MS: 2_000,
    CIRCUIT_BREAKER_THRESHOLD: 5,
    CIRCUIT_BREAKER_COOLDOWN_MS: 1_000,
    ...over,
  } as AppConfig;
  return new RuntimeToolExecutor(config, credentials, clock, metrics);
}

function entry(handle: (ctx: VendorCallContext) => Promise<VendorOutcome>, action: Partial<ToolActionSpec> = {}): CatalogEntry {
  const spec: ToolActionSpec = { name: 'get', description: '', inputSchema: {}, riskLevel: 'low', sideEffect: 'read', idempotent: true, costCents: 0, ...action };
  const handler: VendorHandler = { vendor: 'nango', tools: [], execute: handle };
  return { tool: { name: 'nango_proxy', vendor: 'nango', description: '', actions: [spec] }, action: spec, vendor: 'nango', handler, key: 'nango_proxy.get' };
}

const req = (e: CatalogEntry, orgId = 'org-1') => ({ entry: e, orgId, toolCallId: 't1', idempotencyKey: 'k1', params: {} });

describe('the executor: the call budget and the breaker', () => {
  afterEach(() => vi.restoreAllMocks());

  it('retries plus their backoff never outlast VENDOR_TIMEOUT_MS (the whole call budget): the backoff sleep is cut at the deadline', async () => {
    // Largest jitter every time (a legitimate draw of Math.random()).
    vi.spyOn(Math, 'random').mockReturnValue(0.999);
    const ex = executor({ VENDOR_TIMEOUT_MS: 350 });
    const e = entry(async () => ({ ok: false, kind: 'server_error', vendorStatus: 503, requestSent: true, message: 'shopify server error (HTTP 503)' }));
    const out = await ex.execute(req(e));
    expect(out.status).toBe('failed');
    // Backoffs of ~100, ~200, ~400 ms: the third used to be slept in full past the 350 ms deadline. Every sleep is
    // now cut at the deadline, so together they never exceed the budget (a count, not a clock reading).
    const slept = out.retries.reduce((sum, r) => sum + r.delayMs, 0);
    expect(out.retries.length).toBeGreaterThanOrEqual(2);
    expect(slept).toBeLessThanOrEqual(350);
  });

  it('a half-open probe that never reached the vendor (refused locally before sending) does not close the breaker', async () => {
    const clock = new Clock();
    const ex = executor({ CIRCUIT_BREAKER_THRESHOLD: 2, CIRCUIT_BREAKER_COOLDOWN_MS: 1_000, VENDOR_MAX_RETRIES: 0 }, clock);
    const down = entry(async () => ({ ok: false, kind: 'network', requestSent: true, message: 'vendor connection was reset (ECONNRESET)' }));
    await ex.execute(req(down));
    await ex.execute(req(down));
    expect(ex.breakerFor('org-1', 'nango').current).toBe('open');
    clock.advance(1_001);
    // The probe: the handler refuses the params before anything is sent (e.g. Nango path validation).
    const local = entry(async () => ({ ok: false, kind: 'rejected', requestSent: false, message: 'path: does not stay under the Nango proxy' }));
    const probe = await ex.execute(req(local));
    expect(probe).toMatchObject({ status: 'failed', vendorReached: false });
    // Nothing was learnt about the vendor: not a healthy probe (closed), not a failed one (open again, a new
    // cooldown): still half-open, its probe slot given back, so the next call is the probe.
    expect(ex.breakerFor('org-1', 'nango').current).toBe('half_open');
    const up = entry(async () => ({ ok: true, data: { fine: true }, vendorStatus: 200 }));
    expect(await ex.execute(req(up))).toMatchObject({ status: 'succeeded' });
    expect(ex.breakerFor('org-1', 'nango').current).toBe('closed');
  });

  it('the budget runs from the start of execution: credentials that took it all (a slow database) send nothing, and the breaker learns nothing', async () => {
    const slowCredentials = {
      load: async () => {
        await new Promise((r) => setTimeout(r, 400));
        return { any: 'thing' };
      },
    } as unknown as CredentialsService;
    const config = { VENDOR_TIMEOUT_MS: 300, VENDOR_MAX_RETRIES: 3, VENDOR_RETRY_AFTER_CAP_MS: 2_000, CIRCUIT_BREAKER_THRESHOLD: 1, CIRCUIT_BREAKER_COOLDOWN_MS: 1_000 } as AppConfig;
    const ex = new RuntimeToolExecutor(config, slowCredentials, new Clock(), metrics);
    let sent = 0;
    const write = entry(
      async () => {
        sent++;
        return { ok: true, data: {}, vendorStatus: 200 };
      },
      { sideEffect: 'write', idempotent: false, overwrite: false },
    );
    const out = await ex.execute(req(write));
    expect(out).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT', vendorReached: false });
    expect(sent).toBe(0);
    expect(ex.breakerFor('org-1', 'nango').current).toBe('closed'); // threshold 1: one counted failure would open it
  });
});
