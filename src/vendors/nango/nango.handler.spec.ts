import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { NANGO_EMULATOR_CREDENTIALS, NangoEmulator } from '../../emulator/nango.emulator.js';
import { VendorEmulator } from '../../emulator/vendor-emulator.js';
import type { VendorCallContext, VendorOutcome } from '../vendor-handler.js';
import { callContext, emulatorEndpoints, failure, TEST_USER_AGENT } from '../handler.spec-support.js';
import { HOSTILE_NANGO_PATHS, NON_CANONICAL_NANGO_PATHS } from './nango-path.cases.js';
import { NangoHandler } from './nango.handler.js';

const CREDS: Record<string, unknown> = { ...NANGO_EMULATOR_CREDENTIALS };

let emu: VendorEmulator;
let nango: NangoEmulator;
let handler: NangoHandler;

function ctx(action: string, params: Record<string, unknown>, credentials: Record<string, unknown> = CREDS): VendorCallContext {
  return callContext({ toolName: 'nango_proxy', action, params, credentials });
}

/** What the executor does: validate first, execute only when validate passes. */
async function flow(action: string, params: Record<string, unknown>): Promise<string | VendorOutcome> {
  const invalid = handler.validate('nango_proxy', action, params);
  if (invalid !== null) return invalid;
  return handler.execute(ctx(action, params));
}

beforeAll(async () => {
  nango = new NangoEmulator();
  emu = new VendorEmulator([nango]);
  const url = await emu.start();
  handler = new NangoHandler(emulatorEndpoints(url));
});

afterAll(() => emu.stop());
beforeEach(() => emu.reset());

describe('NangoHandler happy paths', () => {
  it('get: proxies path and encoded query with the Nango headers and no Retries', async () => {
    const out = await handler.execute(ctx('get', { path: '/v1/customers/42', query: { limit: 10, q: 'a b&c', archived: false } }));
    expect(out).toEqual({
      ok: true,
      vendorStatus: 200,
      data: { path: '/v1/customers/42', query: { limit: '10', q: 'a b&c', archived: 'false' }, connectionId: 'conn-emulator-0001' },
    });
    const [req] = emu.requests;
    expect(req.method).toBe('GET');
    expect(req.headers.authorization).toBe(`Bearer ${NANGO_EMULATOR_CREDENTIALS.secretKey}`);
    expect(req.headers['connection-id']).toBe(NANGO_EMULATOR_CREDENTIALS.connectionId);
    expect(req.headers['provider-config-key']).toBe(NANGO_EMULATOR_CREDENTIALS.providerConfigKey);
    expect(req.headers['user-agent']).toBe(TEST_USER_AGENT);
    expect(req.headers.retries).toBeUndefined();
    expect(req.headers['retry-on']).toBeUndefined();
    expect(req.headers['base-url-override']).toBeUndefined();
    // The provider's credentials (added by Nango) must not follow a redirect elsewhere.
    expect(req.headers['forward-headers-on-redirect']).toBe('false');
  });

  it('the provider gets the Accept and User-Agent meant for it (sent as Nango-Proxy-*), and none of Nango\'s own headers', async () => {
    expect((await handler.execute(ctx('get', { path: 'v1/customers/42' }))).ok).toBe(true);
    expect((await handler.execute(ctx('post', { path: 'v1/notes', body: { a: 1 } }))).ok).toBe(true);
    // Nango forwards only Nango-Proxy-<Name> headers upstream (VENDORS.md §4.1): what the provider saw.
    expect(nango.upstreamRequests.map((r) => [r.method, r.headers])).toEqual([
      ['GET', { accept: 'application/json', 'user-agent': TEST_USER_AGENT }],
      ['POST', { accept: 'application/json', 'user-agent': TEST_USER_AGENT, 'content-type': 'application/json' }],
    ]);
    for (const req of emu.requests) {
      expect(req.headers['nango-proxy-accept']).toBe('application/json');
      expect(req.headers['nango-proxy-user-agent']).toBe(TEST_USER_AGENT);
    }
  });

  it('post: sends the JSON body once, never with a Retries header', async () => {
    const out = await handler.execute(ctx('post', { path: 'v1/notes', body: { text: 'hello', n: 1 } }));
    expect(out.ok && out.vendorStatus).toBe(201);
    expect(out.ok && out.data).toMatchObject({ received: { text: 'hello', n: 1 } });
    expect(nango.appliedPosts).toBe(1);
    expect(nango.retriesHeaders).toEqual([]);
    expect(emu.requests[0].headers['content-type']).toBe('application/json');
    expect(emu.requests[0].headers.retries).toBeUndefined();
    expect(emu.requests[0].headers['forward-headers-on-redirect']).toBe('false');
  });

  it('post: no Retries header even when the upstream fails (the write is not retried anywhere)', async () => {
    emu.fault({ vendor: 'nango', method: 'POST', kind: 'status', status: 502 });
    expect(failure(await handler.execute(ctx('post', { path: 'v1/notes', body: { a: 1 } })))).toMatchObject({ kind: 'server_error', vendorStatus: 502 });
    emu.fault({ vendor: 'nango', method: 'POST', kind: 'reset_after' });
    expect(failure(await handler.execute(ctx('post', { path: 'v1/notes', body: { a: 2 } })))).toMatchObject({ kind: 'network', requestSent: true });
    expect(nango.appliedPosts).toBe(1);
    expect(emu.requests.every((r) => r.headers.retries === undefined)).toBe(true);
    expect(nango.retriesHeaders).toEqual([]);
  });
});

describe('NangoHandler errors', () => {
  it('Nango 401 (bad secret key) → auth', async () => {
    const out = failure(await handler.execute(ctx('get', { path: 'v1/x' }, { ...CREDS, secretKey: '00000000-0000-4000-8000-000000000000' })));
    expect(out).toMatchObject({ kind: 'auth', vendorStatus: 401 });
    expect(out.message).toContain('unknown_account');
    expect(out.message).not.toContain('00000000-0000-4000-8000-000000000000');
  });

  it("an upstream 401 (the connection's provider token refused; the body is the provider's, not Nango's) → auth", async () => {
    emu.fault({ vendor: 'nango', kind: 'status', status: 401, body: { errors: '[API] Invalid API key or access token (unrecognized login or wrong password)' } });
    const out = failure(await handler.execute(ctx('get', { path: 'v1/x' })));
    expect(out).toMatchObject({ kind: 'auth', vendorStatus: 401 });
    expect(out.message).not.toContain('Invalid API key');
    // An upstream 403 (a permission on that resource) stays a refusal of the request.
    emu.fault({ vendor: 'nango', kind: 'status', status: 403, body: { errors: 'Forbidden' } });
    expect(failure(await handler.execute(ctx('get', { path: 'v1/x' })))).toMatchObject({ kind: 'rejected', vendorStatus: 403 });
  });

  it('unknown provider config → auth', async () => {
    expect(failure(await handler.execute(ctx('get', { path: 'v1/x' }, { ...CREDS, providerConfigKey: 'nope' })))).toMatchObject({ kind: 'auth', vendorStatus: 404 });
  });

  it('"Failed to get connection" → auth', async () => {
    expect(failure(await handler.execute(ctx('get', { path: 'v1/x' }, { ...CREDS, connectionId: 'conn-unknown' })))).toMatchObject({ kind: 'auth', vendorStatus: 400 });
  });

  it('failed_to_get_connection ("Failed to get connection credentials": the connection needs re-auth) → auth (VENDORS.md §4.5)', async () => {
    emu.fault({ vendor: 'nango', kind: 'status', status: 400, body: { error: { code: 'failed_to_get_connection', message: 'Failed to get connection credentials' } } });
    const out = failure(await handler.execute(ctx('get', { path: 'v1/x' })));
    expect(out).toMatchObject({ kind: 'auth', vendorStatus: 400 });
    expect(out.message).toContain('failed_to_get_connection');
  });

  it("Nango's \"Failed to get connection credentials: '<reason>'\" at the failed refresh's status, 4xx or 5xx → auth", async () => {
    const message = "Failed to get connection credentials: 'The external API returned an error when trying to refresh the access token. Please try again later.'";
    for (const status of [424, 500, 503]) {
      emu.fault({ vendor: 'nango', kind: 'status', status, body: { error: { code: 'server_error', message } } });
      expect(failure(await handler.execute(ctx('post', { path: 'v1/notes', body: { a: 1 } }))), String(status)).toMatchObject({ kind: 'auth', vendorStatus: status });
    }
  });

  it.each([
    [503, 'Failed to get connection'],
    [503, 'Failed to get connection: timeout acquiring client'],
    [500, 'failed to get connection credentials: \'x\''],
    [502, 'Failed to get connection credentials'],
  ])('a POST the provider applied, answered %i server_error "%s" (its body, passed back raw, not Nango\'s words) → server_error, not auth', async (status, message) => {
    emu.fault({ vendor: 'nango', method: 'POST', kind: 'status_then_apply', status, body: { error: { code: 'server_error', message } } });
    const out = failure(await handler.execute(ctx('post', { path: 'v1/notes', body: { a: 1 } })));
    expect(out).toMatchObject({ kind: 'server_error', vendorStatus: status, requestSent: true });
    await vi.waitFor(() => expect(nango.appliedPosts).toBe(1));
  });

  describe('the codes newer Nango releases answer with (proxy.service.ts ProxyServiceErrorCode), as well as the old', () => {
    beforeEach(() => {
      nango.errorCodes = 'current';
    });

    it('an unknown integration: 404 unknown_integration → auth, not not_found', async () => {
      const out = failure(await handler.execute(ctx('get', { path: 'v1/x' }, { ...CREDS, providerConfigKey: 'nope' })));
      expect(out).toMatchObject({ kind: 'auth', vendorStatus: 404 });
      expect(out.message).toContain('unknown_integration');
      expect(nango.upstreamRequests).toHaveLength(0);
    });

    it('an unknown connection: 400 connection_not_found → auth, not rejected; a POST was not forwarded', async () => {
      const out = failure(await handler.execute(ctx('post', { path: 'v1/notes', body: { a: 1 } }, { ...CREDS, connectionId: 'conn-unknown' })));
      expect(out).toMatchObject({ kind: 'auth', vendorStatus: 400 });
      expect(out.message).toContain('connection_not_found');
      expect(nango.appliedPosts).toBe(0);
    });

    it("a failed token refresh: credentials_refresh_failed \"Failed to get connection credentials: '<reason>'\" at the refresh's status, 4xx or 5xx → auth, nothing forwarded", async () => {
      for (const status of [400, 401, 424, 500, 503]) {
        nango.failTokenRefresh(status);
        const out = failure(await handler.execute(ctx('post', { path: 'v1/notes', body: { a: 1 } })));
        expect(out, String(status)).toMatchObject({ kind: 'auth', vendorStatus: status });
        expect(out.message, String(status)).toContain('credentials_refresh_failed');
      }
      expect(nango.appliedPosts).toBe(0);
      // the older release's answer to the same failed refresh still counts
      nango.errorCodes = 'legacy';
      nango.failTokenRefresh(503);
      expect(failure(await handler.execute(ctx('get', { path: 'v1/x' })))).toMatchObject({ kind: 'auth', vendorStatus: 503 });
      nango.failTokenRefresh(undefined);
      expect(await handler.execute(ctx('get', { path: 'v1/x' }))).toMatchObject({ ok: true });
    });

    it('credentials_refresh_failed at a 4xx without Nango\'s words is still Nango\'s refusal → auth', async () => {
      emu.fault({ vendor: 'nango', kind: 'status', status: 424, body: { error: { code: 'credentials_refresh_failed' } } });
      expect(failure(await handler.execute(ctx('get', { path: 'v1/x' })))).toMatchObject({ kind: 'auth', vendorStatus: 424 });
    });

    it.each([
      [503, 'Failed to get connection credentials'],
      [500, 'token endpoint unreachable'],
      [502, undefined],
    ])('a POST the provider applied, answered %i credentials_refresh_failed without Nango\'s words ("%s": the provider\'s body, passed back raw) → server_error, not auth', async (status, message) => {
      emu.fault({ vendor: 'nango', method: 'POST', kind: 'status_then_apply', status, body: { error: { code: 'credentials_refresh_failed', ...(message === undefined ? {} : { message }) } } });
      const out = failure(await handler.execute(ctx('post', { path: 'v1/notes', body: { a: 1 } })));
      expect(out).toMatchObject({ kind: 'server_error', vendorStatus: status, requestSent: true });
      await vi.waitFor(() => expect(nango.appliedPosts).toBe(1));
    });

    it('reset() goes back to the older codes', () => {
      nango.failTokenRefresh(500);
      emu.reset();
      expect(nango.errorCodes).toBe('legacy');
    });
  });

  it('"Failed to get connection" with a reason, at 400, is not Nango\'s (it says that only plain) → rejected', async () => {
    emu.fault({ vendor: 'nango', kind: 'status', status: 400, body: { error: { code: 'server_error', message: 'Failed to get connection: pool exhausted' } } });
    expect(failure(await handler.execute(ctx('get', { path: 'v1/x' })))).toMatchObject({ kind: 'rejected', vendorStatus: 400 });
  });

  it('a redirect is not followed: a failure that keeps its 3xx status (which makes a POST an unknown outcome in the executor)', async () => {
    emu.fault({ vendor: 'nango', method: 'POST', kind: 'status', status: 303, headers: { location: '/v1/notes/1' }, body: '' });
    const post = failure(await handler.execute(ctx('post', { path: 'v1/notes', body: { a: 1 } })));
    expect(post).toMatchObject({ kind: 'rejected', vendorStatus: 303, requestSent: true });
    expect(post.message).toContain('redirect');
    emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 302, headers: { location: '/elsewhere' }, body: '' });
    expect(failure(await handler.execute(ctx('get', { path: 'v1/x' })))).toMatchObject({ kind: 'rejected', vendorStatus: 302 });
  });

  it('Nango 429 too_many_request → rate_limited with Retry-After', async () => {
    emu.fault({ vendor: 'nango', kind: 'status', status: 429 });
    expect(failure(await handler.execute(ctx('get', { path: 'v1/x' })))).toMatchObject({ kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 2000 });
  });

  it('upstream 429 (vendor body, Retry-After passed through) → rate_limited', async () => {
    emu.fault({ vendor: 'nango', kind: 'status', status: 429, body: { errors: 'Exceeded 2 calls per second' }, headers: { 'retry-after': '1.5' } });
    expect(failure(await handler.execute(ctx('get', { path: 'v1/x' })))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 1500 });
  });

  it("SP-API's own 429 through Nango (ErrorList QuotaExceeded, no Retry-After) waits 1/rate as the upstream call would: 2 s, not 1", async () => {
    // VENDORS.md §4.2 (Nango hands the upstream answer back as it came), §2.3 and §2.5 (back off at least 1/rate s, 2 s
    // at 0.5 req/s): a second's wait came back with the bucket half refilled, and the retry was spent on another 429.
    const quota = { errors: [{ code: 'QuotaExceeded', message: 'You exceeded your quota for the requested resource.', details: '' }] };
    emu.fault({ vendor: 'nango', kind: 'status', status: 429, body: quota });
    expect(failure(await handler.execute(ctx('get', { path: 'orders/v0/orders/112-0000001-1234567' })))).toMatchObject({
      kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 2000, retryAfterIsDefault: true,
    });
    // The rate it named, when it named one (x-amzn-RateLimit-Limit): 0.25 req/s is 4 s.
    emu.fault({ vendor: 'nango', kind: 'status', status: 429, body: quota, headers: { 'x-amzn-ratelimit-limit': '0.25' } });
    expect(failure(await handler.execute(ctx('get', { path: 'orders/v0/orders/112-0000001-1234567' })))).toMatchObject({ retryAfterMs: 4000 });
  });

  it('upstream 429 without a Retry-After → rate_limited with a second\'s wait, not jitter alone', async () => {
    emu.fault({ vendor: 'nango', kind: 'status', status: 429, body: { errors: 'QuotaExceeded' } });
    expect(failure(await handler.execute(ctx('get', { path: 'v1/x' })))).toMatchObject({ kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 1000 });
  });

  it('upstream 404 → not_found', async () => {
    expect(failure(await handler.execute(ctx('get', { path: '/missing/thing' })))).toMatchObject({ kind: 'not_found', vendorStatus: 404 });
  });

  it('upstream 5xx → server_error', async () => {
    emu.fault({ vendor: 'nango', kind: 'status', status: 500 });
    expect(failure(await handler.execute(ctx('get', { path: 'v1/x' })))).toMatchObject({ kind: 'server_error', vendorStatus: 500 });
  });

  it('other upstream 4xx → rejected, even when its body has an error.code Nango does not use', async () => {
    emu.fault({ vendor: 'nango', kind: 'status', status: 422, body: { error: { code: 'parameter_invalid', message: 'bad' } } });
    expect(failure(await handler.execute(ctx('get', { path: 'v1/x' })))).toMatchObject({ kind: 'rejected', vendorStatus: 422 });
  });

  it('a non-JSON upstream success is returned as text; malformed JSON → bad_response', async () => {
    emu.fault({ vendor: 'nango', kind: 'status', status: 200, body: 'id,name\n1,a' });
    expect(await handler.execute(ctx('get', { path: 'v1/export.csv' }))).toEqual({ ok: true, vendorStatus: 200, data: 'id,name\n1,a' });
    emu.fault({ vendor: 'nango', kind: 'malformed' });
    expect(failure(await handler.execute(ctx('get', { path: 'v1/x' })))).toMatchObject({ kind: 'bad_response' });
  });

  it('credentials that cannot be headers → auth, nothing sent', async () => {
    const out = failure(await handler.execute(ctx('get', { path: 'v1/x' }, { ...CREDS, connectionId: 'a\r\nX-Evil: 1' })));
    expect(out).toMatchObject({ kind: 'auth', requestSent: false });
    expect(emu.requests).toHaveLength(0);
  });
});

describe('NangoHandler: one spelling of a path', () => {
  const canon = (action: string, params: Record<string, unknown>) => handler.canonicalParams('nango_proxy', action, params);

  it.each(NON_CANONICAL_NANGO_PATHS)('%s: %s is refused by validate() and left as it is by canonicalParams', (_label, path, canonical) => {
    expect(handler.validate('nango_proxy', 'get', { path })).toMatch(/^path: /);
    expect(handler.validate('nango_proxy', 'post', { path, body: {} })).toMatch(/^path: /);
    expect(canon('get', { path })).toEqual({ path });
    expect(handler.validate('nango_proxy', 'get', { path: canonical })).toBeNull();
  });

  it('canonicalParams: a valid path gets its leading "/" and upper-case hex; the rest of the params are kept', () => {
    expect(canon('get', { path: 'v1/search/caf%c3%a9', query: { a: 1 } })).toEqual({ path: '/v1/search/caf%C3%A9', query: { a: 1 } });
    expect(canon('post', { path: '/v1/search/caf%c3%A9', body: { a: 1 } })).toEqual({ path: '/v1/search/caf%C3%A9', body: { a: 1 } });
    const same = { path: '/v1/customers/42' };
    expect(canon('get', same)).toBe(same);
  });

  it('both hex cases of one encoding reach the provider as the same path', async () => {
    for (const path of ['/v1/search/caf%c3%a9', '/v1/search/caf%C3%A9']) {
      expect((await handler.execute(ctx('get', canon('get', { path })))).ok).toBe(true);
    }
    expect(nango.upstreamRequests.map((r) => r.path)).toEqual(['/v1/search/caf%C3%A9', '/v1/search/caf%C3%A9']);
  });
});

describe('NangoHandler hostile paths', () => {
  it.each(HOSTILE_NANGO_PATHS)('validate() rejects %s, naming the field', (_label, path) => {
    expect(handler.validate('nango_proxy', 'get', { path })).toMatch(/^path: /);
    expect(handler.validate('nango_proxy', 'post', { path, body: {} })).toMatch(/^path: /);
  });

  it('no hostile path reaches the emulator through validate-then-execute, nor through execute alone', async () => {
    for (const [, path] of HOSTILE_NANGO_PATHS) {
      expect(typeof (await flow('get', { path }))).toBe('string');
      expect(typeof (await flow('post', { path, body: { a: 1 } }))).toBe('string');
      expect(failure(await handler.execute(ctx('get', { path })))).toMatchObject({ kind: 'rejected', requestSent: false });
      expect(failure(await handler.execute(ctx('post', { path, body: {} })))).toMatchObject({ kind: 'rejected', requestSent: false });
    }
    expect(emu.requests).toHaveLength(0);
    expect(nango.appliedPosts).toBe(0);
  });

  it.each([
    ['get', { path: 'v1/x', query: { 'Base-Url-Override': 'http://evil.example' } }],
    ['get', { path: 'v1/x', query: { baseUrlOverride: 'http://evil.example' } }],
    ['get', { path: 'v1/x', query: { 'Connection-Id': 'someone-else' } }],
    ['get', { path: 'v1/x', query: { 'Nango-Proxy-Authorization': 'Bearer x' } }],
    ['get', { path: 'v1/x', base_url_override: 'http://evil.example' }],
    ['post', { path: 'v1/x', body: {}, Retries: 3 }],
    ['post', { path: 'v1/x', body: {}, 'Retry-On': '500' }],
    ['post', { path: 'v1/x', body: {}, 'Provider-Config-Key': 'other' }],
  ] as const)('rejects control keys: %s %j', async (action, params) => {
    const out = await flow(action, { ...params });
    expect(out).toMatch(/may not set Nango control headers/);
    expect(emu.requests).toHaveLength(0);
  });

  it('a valid path still goes through the flow', async () => {
    const out = await flow('get', { path: '/v1/spreadsheets/abc:batchGet', query: { range: 'A1:B2' } });
    expect(typeof out === 'object' && out.ok).toBe(true);
    expect(emu.requests).toHaveLength(1);
  });
});
