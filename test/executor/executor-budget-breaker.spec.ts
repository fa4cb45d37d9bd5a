import 'reflect-metadata';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CatalogEntry } from '../../src/catalog/tool-catalog.service.js';
import { Clock } from '../../src/common/clock.js';
import type { AppConfig } from '../../src/config/app-config.js';
import type { MetricsService } from '../../src/metrics/metrics.service.js';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';
import { RuntimeToolExecutor } from '../../src/executor/runtime-tool-executor.js';
import { NangoHandler } from '../../src/vendors/nango/nango.handler.js';
import type { ToolActionSpec, VendorCallContext, VendorEndpoints, VendorHandler, VendorOutcome } from '../../src/vendors/vendor-handler.js';
import { fixedCredentials } from './fixed-credentials.js';

const metrics = {
  onScrape: () => undefined,
  breakerState: { reset: () => undefined, set: () => undefined },
  vendorLatency: { observe: () => undefined },
} as unknown as MetricsService;
const credentials = fixedCredentials({ any: 'thing' });
const NANGO_SECRET_KEY = 'sk-test-123456';
recordMintedSecret('executor-budget-breaker.spec Nango secret key', NANGO_SECRET_KEY); // the run-wide leak scan looks for it too

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
    const ex = executor({ VENDOR_TIMEOUT_MS: 2_000 });
    const e = entry(async () => ({ ok: false, kind: 'server_error', vendorStatus: 503, requestSent: true, message: 'shopify server error (HTTP 503)' }));
    const out = await ex.execute(req(e));
    expect(out.status).toBe('failed');
    // Backoffs of ~100, ~200, ~400, ~800, ~1600 ms: the fifth used to be slept in full past the 2 s deadline (3.1 s in
    // all). Every sleep is now cut at the deadline, so together they never exceed the budget (a count, not a clock
    // reading). The first four take 1.5 s: room for a loaded machine's pauses before the deadline cuts them short.
    const slept = out.retries.reduce((sum, r) => sum + r.delayMs, 0);
    expect(out.retries.length).toBeGreaterThanOrEqual(3);
    expect(slept).toBeLessThanOrEqual(2_000);
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
    const slowCredentials = fixedCredentials({ any: 'thing' }, () => new Promise((r) => setTimeout(r, 400)));
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

  it('a retry due at the edge of the budget is not started: a write refused with 429 stays a refusal, not "sent, answer lost"', async () => {
    // The largest jitter puts the retry past the deadline; the backoff is cut to end at it, and that timer and
    // the budget's abort fall due together. Whichever fires first, no attempt may start with no time left.
    vi.spyOn(Math, 'random').mockReturnValue(0.999);
    const ex = executor({ VENDOR_TIMEOUT_MS: 200, VENDOR_MAX_RETRIES: 3, CIRCUIT_BREAKER_THRESHOLD: 1_000 });
    const late: number[] = [];
    const write = entry(
      async (ctx) => {
        if (ctx.attempt === 0) return { ok: false, kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 150, requestSent: true, message: '429' };
        late.push(ctx.deadline! - performance.now());
        // What vendorRequest does on a pooled socket when the call's signal aborts it: sent, no answer.
        if (!ctx.signal.aborted) await new Promise<void>((r) => ctx.signal.addEventListener('abort', () => r(), { once: true }));
        return { ok: false, kind: 'timeout', requestSent: true, message: 'vendor call aborted' };
      },
      { name: 'add_note', sideEffect: 'write', idempotent: true, overwrite: false },
    );
    const codes: string[] = [];
    for (let i = 0; i < 10; i++) {
      const out = await ex.execute({ ...req(write), toolCallId: `t${i}`, idempotencyKey: `k${i}` });
      codes.push(out.status === 'succeeded' ? 'ok' : out.errorCode);
    }
    expect(late).toEqual([]);
    expect(codes).toEqual(Array(10).fill('VENDOR_RATE_LIMITED'));
  });

  /**
   * The room a retry needs is judged on the whole sleep, the vendor's wait and the jitter on top of it, and is the
   * quarter of the budget a write after a wait gets (writeSendRoomMs), for a read and a poll too. Judged on the
   * Retry-After alone with 20 ms of room, a read woke with ~95 ms of 1 s left, was sent, timed out on the gateway's
   * own deadline, and the call was reported VENDOR_TIMEOUT (no retryAfterSeconds) and held against the breaker,
   * though the vendor had only ever answered a prompt 429.
   */
  it('a read 429 whose Retry-After plus jitter leaves no room for an answer is not retried: VENDOR_RATE_LIMITED with retryAfterSeconds, breaker closed', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.999); // the largest jitter: ~99 ms on top of the first wait
    const ex = executor({ VENDOR_TIMEOUT_MS: 1_000, VENDOR_MAX_RETRIES: 3, CIRCUIT_BREAKER_THRESHOLD: 1 });
    const late: number[] = [];
    const read = entry(async (ctx) => {
      if (ctx.attempt > 0) {
        late.push(ctx.deadline! - performance.now());
        // A vendor answering in 150 ms: past the deadline, the gateway's own timeout.
        await new Promise<void>((r) => {
          const t = setTimeout(r, 150);
          ctx.signal.addEventListener('abort', () => (clearTimeout(t), r()), { once: true });
        });
        if (ctx.signal.aborted) return { ok: false, kind: 'timeout', requestSent: true, message: 'vendor call aborted' };
      }
      return { ok: false, kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 800, requestSent: true, message: 'nango rate limited (HTTP 429)' };
    });
    const out = await ex.execute(req(read, 'org-room'));
    expect(late).toEqual([]);
    expect(out).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED', retryAfterSeconds: 1, vendorStatus: 429, retries: [] });
    expect(ex.breakerFor('org-room', 'nango').current).toBe('closed');
  });

  it('with room for the answer after the wait and its jitter, the same read 429 is retried', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.999);
    const ex = executor({ VENDOR_TIMEOUT_MS: 2_000, VENDOR_MAX_RETRIES: 3 });
    const left: number[] = [];
    const read = entry(async (ctx) => {
      if (ctx.attempt === 0) return { ok: false, kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 800, requestSent: true, message: '429' };
      left.push(ctx.deadline! - performance.now());
      return { ok: true, data: { fine: true }, vendorStatus: 200 };
    });
    const out = await ex.execute(req(read, 'org-room-ok'));
    expect(out).toMatchObject({ status: 'succeeded', retries: [{ attempt: 1, delayMs: 899, reason: 'rate_limited' }] });
    expect(left).toHaveLength(1);
    expect(left[0]).toBeGreaterThanOrEqual(500); // a quarter of the budget, at least
  });

  it('an "in progress" poll is not sent without room for an answer as slow as the last: the write stays OUTCOME_UNKNOWN and the breaker closed', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.999);
    const ex = executor({ VENDOR_TIMEOUT_MS: 1_000, VENDOR_MAX_RETRIES: 3, CIRCUIT_BREAKER_THRESHOLD: 1 });
    const late: number[] = [];
    const write = entry(
      async (ctx) => {
        if (ctx.attempt > 0) {
          late.push(ctx.deadline! - performance.now());
          if (!ctx.signal.aborted) await new Promise<void>((r) => ctx.signal.addEventListener('abort', () => r(), { once: true }));
          return { ok: false, kind: 'timeout', requestSent: true, message: 'vendor call aborted' };
        }
        await new Promise((r) => setTimeout(r, 60)); // the vendor took 60 ms to say so: a poll needs 120 ms for its answer
        return { ok: false, kind: 'in_progress', vendorStatus: 200, retryAfterMs: 800, requestSent: true, message: 'refund in progress' };
      },
      { name: 'create', sideEffect: 'write', idempotent: true, overwrite: false },
    );
    const out = await ex.execute(req(write, 'org-poll-room'));
    expect(late).toEqual([]);
    expect(out).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', retries: [] });
    expect(ex.breakerFor('org-poll-room', 'nango').current).toBe('closed');
  });

  it('over real HTTP: a Nango read answered 429 (Retry-After 0.8 s of a 1 s budget) is not sent again; VENDOR_RATE_LIMITED, retryAfterSeconds 1, breaker closed', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.999);
    let requests = 0;
    const server = http.createServer((_rq, rs) => {
      requests++;
      setTimeout(() => {
        rs.writeHead(429, { 'Retry-After': '0.8', 'Content-Type': 'application/json' });
        rs.end('{}');
      }, requests === 1 ? 0 : 150);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const config = { VENDOR_TIMEOUT_MS: 1_000, VENDOR_MAX_RETRIES: 3, VENDOR_RETRY_AFTER_CAP_MS: 2_000, CIRCUIT_BREAKER_THRESHOLD: 1, CIRCUIT_BREAKER_COOLDOWN_MS: 30_000 } as AppConfig;
      const nangoCredentials = fixedCredentials({ secretKey: NANGO_SECRET_KEY, connectionId: 'conn-1', providerConfigKey: 'github' });
      const ex = new RuntimeToolExecutor(config, nangoCredentials, new Clock(), metrics);
      const handler = new NangoHandler({
        nangoHost: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, timeoutMs: 1_000, connectTimeoutMs: 500, maxResponseBytes: 1 << 20, userAgent: 'test',
      } as VendorEndpoints);
      const spec = handler.tools[0].actions.find((a) => a.name === 'get')!;
      const nangoGet = { tool: handler.tools[0], action: spec, vendor: 'nango', handler, key: 'nango_proxy.get' } as unknown as CatalogEntry;
      const out = await ex.execute({ entry: nangoGet, orgId: 'org-http-room', toolCallId: 't1', idempotencyKey: 'k1', params: { path: '/repos/x' } });
      expect(requests).toBe(1);
      expect(out).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED', retryAfterSeconds: 1 });
      expect(ex.breakerFor('org-http-room', 'nango').current).toBe('closed');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('over real HTTP: a read rate-limited until its budget ends is VENDOR_RATE_LIMITED, sends nothing after the budget, and leaves the breaker closed', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.999);
    let requests = 0;
    const server = http.createServer((_rq, rs) => {
      requests++;
      setTimeout(() => {
        rs.writeHead(429, { 'Retry-After': '0.15', 'Content-Type': 'application/json' });
        rs.end('{}');
      }, 5);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const config = { VENDOR_TIMEOUT_MS: 200, VENDOR_MAX_RETRIES: 3, VENDOR_RETRY_AFTER_CAP_MS: 2_000, CIRCUIT_BREAKER_THRESHOLD: 5, CIRCUIT_BREAKER_COOLDOWN_MS: 30_000 } as AppConfig;
      const nangoCredentials = fixedCredentials({ secretKey: NANGO_SECRET_KEY, connectionId: 'conn-1', providerConfigKey: 'github' });
      const ex = new RuntimeToolExecutor(config, nangoCredentials, new Clock(), metrics);
      const handler = new NangoHandler({
        nangoHost: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, timeoutMs: 10_000, connectTimeoutMs: 1_000, maxResponseBytes: 1 << 20, userAgent: 'test',
      } as VendorEndpoints);
      const spec = handler.tools[0].actions.find((a) => a.name === 'get')!;
      const nangoGet = { tool: handler.tools[0], action: spec, vendor: 'nango', handler, key: 'nango_proxy.get' } as unknown as CatalogEntry;
      const codes: string[] = [];
      let sentAfterBudget = 0;
      for (let i = 0; i < 5; i++) {
        const before = requests;
        const out = await ex.execute({ entry: nangoGet, orgId: 'org-a', toolCallId: `t${i}`, idempotencyKey: `k${i}`, params: { path: '/repos/x' } });
        codes.push(out.status === 'succeeded' ? 'ok' : out.errorCode);
        sentAfterBudget += requests - before - 1;
      }
      expect(codes).toEqual(Array(5).fill('VENDOR_RATE_LIMITED'));
      expect(sentAfterBudget).toBe(0);
      expect(ex.breakerFor('org-a', 'nango').current).toBe('closed');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
