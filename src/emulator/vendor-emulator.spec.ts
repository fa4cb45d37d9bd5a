import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { vendorRequest, VendorHttpError, type VendorHttpRequest } from '../vendors/http/vendor-http.js';
import type { EmulatedVendor, EmuRequest, EmuResponse } from './emulator.types.js';
import { VendorEmulator } from './vendor-emulator.js';

/** A minimal vendor: counts what it applied and echoes the request. */
class EchoVendor implements EmulatedVendor {
  readonly vendor = 'nango' as const;
  applied = 0;
  handles(req: EmuRequest): boolean {
    return req.path.startsWith('/proxy/');
  }
  handle(req: EmuRequest): EmuResponse {
    this.applied++;
    return { status: 200, headers: { 'x-echo': '1' }, body: { method: req.method, path: req.path, q: req.query.get('q'), json: req.json ?? null } };
  }
  reset(): void {
    this.applied = 0;
  }
}

const echo = new EchoVendor();
const emu = new VendorEmulator([echo]);

function call(path: string, extra: Partial<VendorHttpRequest> = {}): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return vendorRequest({ method: 'GET', url: `${emu.url}${path}`, timeoutMs: 2_000, connectTimeoutMs: 500, maxResponseBytes: 10 * 1024 * 1024, ...extra }).then(
    (r) => ({ status: r.status, headers: r.headers, body: r.text() }),
  );
}

async function callError(path: string, extra: Partial<VendorHttpRequest> = {}): Promise<VendorHttpError> {
  const err: unknown = await call(path, extra).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(VendorHttpError);
  return err as VendorHttpError;
}

beforeAll(async () => {
  await emu.start();
});
afterAll(() => emu.stop());
beforeEach(() => emu.reset());

describe('VendorEmulator', () => {
  it('routes to the vendor that claims the path and records the request', async () => {
    const res = await call('/proxy/items?q=1', { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(200);
    expect(res.headers['x-echo']).toBe('1');
    expect(JSON.parse(res.body)).toEqual({ method: 'POST', path: '/proxy/items', q: '1', json: { a: 1 } });
    const [rec] = emu.requests;
    expect(rec).toMatchObject({ vendor: 'nango', method: 'POST', path: '/proxy/items', body: '{"a":1}', applied: true });
    expect(rec.finishedAt).toBeGreaterThanOrEqual(rec.receivedAt);
    expect(Math.abs(rec.receivedAt - Date.now())).toBeLessThan(5_000);
    expect(emu.count({ vendor: 'nango', method: 'post', path: /items/ })).toBe(1);
  });

  it('answers 404 JSON when no vendor claims the path', async () => {
    const res = await call('/nowhere');
    expect(res.status).toBe(404);
    expect(JSON.parse(res.body)).toHaveProperty('error');
    expect(emu.count({ applied: false })).toBe(1);
  });

  it('applies a status fault the given number of times', async () => {
    emu.fault({ vendor: 'nango', kind: 'status', status: 503, times: 2 });
    expect((await call('/proxy/a')).status).toBe(503);
    expect((await call('/proxy/a')).status).toBe(503);
    expect((await call('/proxy/a')).status).toBe(200);
    expect(echo.applied).toBe(1);
  });

  it('matches faults by path and method', async () => {
    emu.fault({ path: /^\/proxy\/b$/, method: 'DELETE', kind: 'status', status: 418 });
    expect((await call('/proxy/b')).status).toBe(200);
    expect((await call('/proxy/b', { method: 'DELETE' })).status).toBe(418);
  });

  it('reset_before drops the connection without applying', async () => {
    emu.fault({ kind: 'reset_before' });
    expect((await callError('/proxy/x', { method: 'POST', body: 'x' })).kind).toBe('reset');
    expect(echo.applied).toBe(0);
    expect(emu.count({ applied: false })).toBe(1);
  });

  it('reset_after applies the request, then drops the connection', async () => {
    emu.fault({ kind: 'reset_after' });
    expect((await callError('/proxy/x', { method: 'POST', body: 'x' })).kind).toBe('reset');
    expect(echo.applied).toBe(1);
    expect(emu.count({ applied: true })).toBe(1);
  });

  it('delay and delay_after hold the answer past the client timeout', async () => {
    emu.fault({ kind: 'delay_after', delayMs: 500 });
    const err = await callError('/proxy/x', { timeoutMs: 100 });
    expect(err).toMatchObject({ kind: 'timeout', requestSent: true });
    expect(echo.applied).toBe(1);
    emu.fault({ kind: 'delay', delayMs: 50 });
    const started = Date.now();
    expect((await call('/proxy/x')).status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  });

  it('malformed and huge answer 200 with broken or oversize JSON', async () => {
    emu.fault({ kind: 'malformed' });
    const bad = await call('/proxy/x');
    expect(bad.status).toBe(200);
    expect(() => JSON.parse(bad.body) as unknown).toThrow();
    emu.fault({ kind: 'huge', sizeBytes: 200_000 });
    const huge = await call('/proxy/x');
    expect(huge.body.length).toBe(200_000);
    expect(JSON.parse(huge.body)).toHaveProperty('data');
  });

  it('throttled falls back to 429 with Retry-After for vendors without their own shape', async () => {
    emu.fault({ kind: 'throttled' });
    const res = await call('/proxy/x');
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBe('1');
  });

  it('drops the oldest records beyond recordLimit', async () => {
    emu.recordLimit = 10;
    try {
      for (let i = 0; i < 12; i++) await call(`/proxy/${i}`);
      expect(emu.requests.length).toBeLessThanOrEqual(10);
      expect(emu.requests.at(-1)?.path).toBe('/proxy/11');
    } finally {
      emu.recordLimit = Infinity;
    }
  });

  it('reset clears the log, the faults and the vendors', async () => {
    emu.fault({ kind: 'status', status: 500, times: Infinity });
    await call('/proxy/x');
    emu.reset();
    expect(emu.requests).toHaveLength(0);
    expect((await call('/proxy/x')).status).toBe(200);
    expect(emu.vendor<EchoVendor>('nango')).toBe(echo);
    expect(() => emu.vendor('amazon')).toThrow();
  });
});
