import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NangoEmulator } from '../../src/emulator/index.js';
import { startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { call, eventsOf, rowOf, setupNangoOrg } from './support.js';

/**
 * Nango answers that say less than they seem to (VENDORS.md §4): a redirect
 * the gateway does not follow, Nango's own "cannot use the connection", and
 * the headers that only reach the provider when sent as Nango-Proxy-<Name>.
 */
describe('Nango proxy answers through the pipeline', () => {
  let h: Harness;
  let org: OrgSetup;
  let nango: NangoEmulator;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupNangoOrg(h.t);
    nango = h.emu.vendor<NangoEmulator>('nango');
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });

  it('a POST answered 303 See Other (the provider did it) → indeterminate / OUTCOME_UNKNOWN, sent once, never retried', async () => {
    const posts = nango.appliedPosts;
    const before = h.emu.count({ vendor: 'nango' });
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'status_then_apply', status: 303, headers: { location: '/v1/notes/1' }, body: '', delayMs: 20 });
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { a: 1 } });
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', toolResult: { is_error: true } });
    await waitFor(() => nango.appliedPosts - posts === 1, 'the provider to apply the POST it answered 303');
    expect(await rowOf(h, res.body.toolCallId as string)).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN', retry_count: 0 });
    expect((await eventsOf(h, res.body.toolCallId as string)).map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.indeterminate']);
    expect(h.emu.count({ vendor: 'nango' }) - before).toBe(1);
  });

  it('a GET answered with a redirect stays failed / VENDOR_ERROR (a read changes nothing)', async () => {
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 303, headers: { location: '/elsewhere' }, body: '' });
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
  });

  it('numbers a double would change (a 64-bit id, 1e400, 1e-400) reach the model, the stored result and the ledger as the provider wrote them', async () => {
    // JSON.parse read 12345678901234567891 as 12345678901234567000 (another ticket, stated as fact), 1e400 as null and 1e-400 as 0.
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 200, headers: { 'content-type': 'application/json' }, body: '{"ticket":{"id":12345678901234567891,"balance":1e400,"rate":1e-400,"n":42}}' });
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/tickets/1' });
    expect(res.body).toMatchObject({ status: 'succeeded' });
    const shown = { ticket: { id: '12345678901234567891', balance: '1e400', rate: '1e-400', n: 42 } };
    expect(JSON.parse((res.body as { toolResult: { content: string } }).toolResult.content)).toMatchObject(shown);
    const stored = await h.t.http.get(`/v1/tool-calls/${res.body.toolCallId as string}/result`).set(bearer(org.agentKey));
    expect(JSON.stringify(stored.body)).toContain('"id":"12345678901234567891"');
    expect(JSON.stringify((await rowOf(h, res.body.toolCallId as string)).output_redacted)).toContain('"id":"12345678901234567891"');
  });

  it('failed_to_get_connection (the connection needs re-auth) → CREDENTIALS_INVALID, not retried', async () => {
    const before = h.emu.count({ vendor: 'nango' });
    h.emu.fault({ vendor: 'nango', kind: 'status', status: 400, body: { error: { code: 'failed_to_get_connection', message: 'Failed to get connection credentials' } } });
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'CREDENTIALS_INVALID' });
    expect(h.emu.count({ vendor: 'nango' }) - before).toBe(1);
  });

  describe('the codes newer Nango releases use (unknown_integration, connection_not_found, credentials_refresh_failed)', () => {
    afterEach(() => {
      nango.errorCodes = 'legacy';
      nango.failTokenRefresh(undefined);
    });

    it.each([
      ['404 unknown_integration', 404, 'unknown_integration', 'Provider config not found for the given provider config key. Please make sure the provider config exists in the Nango dashboard.'],
      ['400 connection_not_found', 400, 'connection_not_found', 'Failed to get connection'],
    ])('%s (the org\'s Nango setup) → failed / CREDENTIALS_INVALID, not VENDOR_NOT_FOUND / VENDOR_ERROR, sent once', async (_, status, code, message) => {
      const before = h.emu.count({ vendor: 'nango' });
      h.emu.fault({ vendor: 'nango', kind: 'status', status, body: { error: { code, message } } });
      const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'CREDENTIALS_INVALID' });
      expect(h.emu.count({ vendor: 'nango' }) - before).toBe(1);
    });

    it.each([424, 503])('a POST Nango answers %i credentials_refresh_failed (nothing forwarded: the connection needs re-auth) → failed / CREDENTIALS_INVALID, not OUTCOME_UNKNOWN, never retried', async (status) => {
      nango.errorCodes = 'current';
      nango.failTokenRefresh(status);
      const posts = nango.appliedPosts;
      const before = h.emu.count({ vendor: 'nango' });
      const res = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { a: 1 } });
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'CREDENTIALS_INVALID' });
      expect(await rowOf(h, res.body.toolCallId as string)).toMatchObject({ status: 'failed', error_code: 'CREDENTIALS_INVALID', retry_count: 0 });
      expect({ sent: h.emu.count({ vendor: 'nango' }) - before, applied: nango.appliedPosts - posts }).toEqual({ sent: 1, applied: 0 });
    });
  });

  // An upstream's non-2xx body comes back raw (§4.2): a code Nango also uses counts as Nango's only at Nango's status.
  it.each([
    ['server_error, "Failed to get connection from pool"', { error: { code: 'server_error', message: 'Failed to get connection from pool' } }],
    ['plan_limit', { error: { code: 'plan_limit', message: 'upstream busy' } }],
    ['too_many_request', { error: { code: 'too_many_request' } }],
    ['unknown_account', { error: { code: 'unknown_account' } }],
  ])('a POST answered 503 by the provider with a body using Nango\'s code %s → indeterminate, sent once', async (_, body) => {
    const posts = nango.appliedPosts;
    const before = h.emu.count({ vendor: 'nango' });
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'status_then_apply', status: 503, body, delayMs: 20 });
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { a: 1 } });
    await waitFor(() => nango.appliedPosts - posts === 1, 'the provider to apply the POST');
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    expect(res.body.retryAfterSeconds).toBeUndefined();
    expect(h.emu.count({ vendor: 'nango' }) - before).toBe(1);
  });

  it('Nango\'s own codes at Nango\'s status still count: 429 too_many_request → rate limited, 402 plan_limit → refused', async () => {
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 429, body: { error: { code: 'too_many_request' } }, headers: { 'retry-after': '7' }, times: Infinity });
    const limited = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
    expect(limited.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED', retryAfterSeconds: 7 });
    h.emu.clearFaults();
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'status', status: 402, body: { error: { code: 'plan_limit' } } });
    const capped = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { a: 3 } });
    expect(capped.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
  });

  it("Nango's refusals of the org's setup before forwarding, in every release's words → failed / CREDENTIALS_INVALID, sent once, nothing applied", async () => {
    const cases: { status: number; body: object; method: 'POST' | 'GET' }[] = [
      // An unknown (well-formed) secret key, before releases answered 401 unknown_account: NangoError's default case.
      { status: 500, method: 'POST', body: { error: { code: 'unhandled_unknown_user_account', message: "An unhandled error of type 'unknown_user_account' with payload '{}' has occurred", payload: {} } } },
      { status: 500, method: 'GET', body: { error: { code: 'unhandled_unknown_user_account', message: "An unhandled error of type 'unknown_user_account' with payload '{}' has occurred", payload: {} } } },
      // Newer releases' validateBaseUrlOverride: the integration's custom base URL, which the server does not allow.
      { status: 400, method: 'POST', body: { error: { code: 'base_url_override_disabled', message: 'Base URL override is disabled by server configuration.' } } },
      // A scoped secret key without environment:proxy (scope.middleware).
      { status: 403, method: 'POST', body: { error: { code: 'forbidden', message: 'Insufficient scope. Required: environment:proxy' } } },
    ];
    for (const c of cases) {
      const posts = nango.appliedPosts;
      const before = h.emu.count({ vendor: 'nango' });
      h.emu.fault({ vendor: 'nango', method: c.method, kind: 'status', status: c.status, body: c.body, times: Infinity });
      const res = c.method === 'POST'
        ? await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { a: 4 } })
        : await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
      const what = `${c.method} ${c.status} ${JSON.stringify(c.body)}`;
      expect(res.body, what).toMatchObject({ status: 'failed', errorCode: 'CREDENTIALS_INVALID' });
      expect(h.emu.count({ vendor: 'nango' }) - before, what).toBe(1);
      expect(nango.appliedPosts - posts, what).toBe(0);
      h.emu.clearFaults();
    }
  });

  it("a provider's own 403 with the code forbidden (its body, passed back raw) stays the provider's refusal → failed / VENDOR_ERROR", async () => {
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 403, body: { error: { code: 'forbidden', message: 'You cannot read this customer' } } });
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
  });

  it('Nango 400 base_url_override_* (the gateway sends no override: Nango refused the provider\'s redirect, after the provider had the POST) → indeterminate', async () => {
    const posts = nango.appliedPosts;
    const body = { error: { code: 'base_url_override_not_allowed', message: 'This base URL override is not allowed by server configuration.' } };
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'status_then_apply', status: 400, body, delayMs: 20 });
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { a: 2 } });
    await waitFor(() => nango.appliedPosts - posts === 1, 'the provider to apply the POST');
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
  });

  it('a GET answered 400 base_url_override_* (the same GET meets the same redirect) → failed / VENDOR_ERROR, sent once (VENDORS.md §5: no retry on a Nango 400)', async () => {
    const body = { error: { code: 'base_url_override_not_allowed', message: 'This base URL override is not allowed by server configuration.' } };
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 400, body, times: Infinity });
    const before = h.emu.count({ vendor: 'nango' });
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
    expect(h.emu.count({ vendor: 'nango' }) - before).toBe(1);
    expect(await rowOf(h, res.body.toolCallId as string)).toMatchObject({ status: 'failed', retry_count: 0 });
  });

  it('GETs refused base_url_override_* do not open the org\'s Nango circuit breaker: they say nothing of Nango\'s health', async () => {
    const body = { error: { code: 'base_url_override_not_allowed', message: 'This base URL override is not allowed by server configuration.' } };
    h.emu.fault({ vendor: 'nango', method: 'GET', path: /redirecting/, kind: 'status', status: 400, body, times: Infinity });
    for (let i = 0; i < 6; i++) {
      const refused = await call(h, org, 'nango_proxy', { action: 'get', path: `v1/redirecting/${i}` });
      expect(refused.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
    }
    const ok = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
    expect(ok.body).toMatchObject({ status: 'succeeded' });
  });

  it('POSTs answered 400 base_url_override_* (each indeterminate) do not open the org\'s Nango circuit breaker either: Nango answered', async () => {
    const body = { error: { code: 'base_url_override_not_allowed', message: 'This base URL override is not allowed by server configuration.' } };
    h.emu.fault({ vendor: 'nango', method: 'POST', path: /redirecting/, kind: 'status', status: 400, body, times: Infinity });
    for (let i = 0; i < 6; i++) {
      const unknown = await call(h, org, 'nango_proxy', { action: 'post', path: `v1/redirecting/${i}`, body: { i } });
      expect(unknown.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    }
    const ok = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
    expect(ok.body).toMatchObject({ status: 'succeeded' });
  });

  it('the provider behind Nango receives the gateway\'s Accept and User-Agent, and no Nango credential', async () => {
    const before = nango.upstreamRequests.length;
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/customers/42' });
    expect(res.body.status).toBe('succeeded');
    const [seen] = nango.upstreamRequests.slice(before);
    expect(seen.headers.accept).toBe('application/json');
    expect(seen.headers['user-agent']).toMatch(/\S/);
    expect(Object.keys(seen.headers).sort()).toEqual(['accept', 'user-agent']);
  });
});
