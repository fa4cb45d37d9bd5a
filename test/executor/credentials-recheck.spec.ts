import 'reflect-metadata';
import { describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../../src/catalog/tool-catalog.service.js';
import { Clock } from '../../src/common/clock.js';
import type { AppConfig } from '../../src/config/app-config.js';
import type { CredentialsService } from '../../src/credentials/credentials.service.js';
import type { MetricsService } from '../../src/metrics/metrics.service.js';
import { RuntimeToolExecutor } from '../../src/executor/runtime-tool-executor.js';
import type { ToolActionSpec, VendorHandler, VendorOutcome } from '../../src/vendors/vendor-handler.js';

/** The check of the org's credentials before a retry, where it cannot be answered: the retry is not sent. */
const metrics = {
  onScrape: () => undefined,
  breakerState: { reset: () => undefined, set: () => undefined },
  vendorLatency: { observe: () => undefined },
} as unknown as MetricsService;
const config = { VENDOR_TIMEOUT_MS: 3_000, VENDOR_MAX_RETRIES: 3, VENDOR_RETRY_AFTER_CAP_MS: 2_000, CIRCUIT_BREAKER_THRESHOLD: 5, CIRCUIT_BREAKER_COOLDOWN_MS: 1_000 } as AppConfig;

function entry(outcome: VendorOutcome, sent: { n: number }, action: Partial<ToolActionSpec>): CatalogEntry {
  const spec: ToolActionSpec = { name: 'post', description: '', inputSchema: {}, riskLevel: 'low', sideEffect: 'read', idempotent: true, costCents: 0, ...action };
  const handler: VendorHandler = { vendor: 'nango', tools: [], execute: async () => (sent.n++, outcome) };
  return { tool: { name: 'nango_proxy', vendor: 'nango', description: '', actions: [spec] }, action: spec, vendor: 'nango', handler, key: `nango_proxy.${spec.name}` };
}

describe('the executor: credentials that cannot be checked before a retry', () => {
  it('an idempotent write refused with 429: no retry is sent, and the call stays a refusal (not "sent, answer lost")', async () => {
    let checks = 0;
    const credentials = {
      loadStamped: async () => ({ config: { secretKey: 'x' }, stamp: 's1' }),
      stampOf: async () => {
        checks++;
        throw new Error('database unavailable');
      },
    } as unknown as CredentialsService;
    const ex = new RuntimeToolExecutor(config, credentials, new Clock(), metrics);
    const sent = { n: 0 };
    const refused: VendorOutcome = { ok: false, kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 50, requestSent: true, message: 'nango rate limited (HTTP 429)' };
    const out = await ex.execute({ entry: entry(refused, sent, { sideEffect: 'write' }), orgId: 'org-1', toolCallId: 't1', idempotencyKey: 'k1', params: {} });
    expect(sent.n).toBe(1);
    expect(checks).toBe(1);
    expect(out).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED', retries: [] });
  });
});
