import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { JUMIO_ACCOUNT_IDS, JUMIO_EMULATOR_CREDENTIALS, JUMIO_EXECUTION_IDS, JUMIO_FIXTURE_PII, JumioEmulator } from '../../emulator/jumio.emulator.js';
import { VendorEmulator } from '../../emulator/vendor-emulator.js';
import { TokenCache } from '../auth/token-cache.js';
import type { VendorCallContext, VendorEndpoints } from '../vendor-handler.js';
import { callContext, emulatorEndpoints, failure, TEST_USER_AGENT } from '../handler.spec-support.js';
import { JumioHandler } from './jumio.handler.js';

const CREDS = { ...JUMIO_EMULATOR_CREDENTIALS, region: 'amer-1' };

let emu: VendorEmulator;
let jumio: JumioEmulator;
let endpoints: VendorEndpoints;

function ctx(params: Record<string, unknown>, credentials: Record<string, unknown> = CREDS): VendorCallContext {
  return callContext({ toolName: 'kyc', action: 'get_status', params, credentials });
}

const statusPath = /\/status$/;
const detailsPath = /\/workflow-executions\/[^/]+$/;
const tokenPath = /^\/oauth2\/token$/;
const processed = { workflowExecutionId: JUMIO_EXECUTION_IDS.processed };

beforeAll(async () => {
  jumio = new JumioEmulator();
  emu = new VendorEmulator([jumio]);
  const url = await emu.start();
  endpoints = emulatorEndpoints(url);
});

afterAll(() => emu.stop());
beforeEach(() => emu.reset());

describe('JumioHandler get_status', () => {
  it('PROCESSED: fetches details once and returns only the safe decision facts', async () => {
    const out = await new JumioHandler(endpoints, new TokenCache()).execute(ctx(processed));
    expect(out).toEqual({
      ok: true,
      vendorStatus: 200,
      data: {
        workflowExecutionId: JUMIO_EXECUTION_IDS.processed,
        status: 'PROCESSED',
        decision: { type: 'WARNING', label: 'WARNING', riskScore: 50 },
        capabilities: { usability: 'PASSED', similarity: 'WARNING', liveness: 'PASSED', extraction: 'PASSED', dataChecks: 'PASSED' },
        completedAt: '2026-08-04T11:03:41.000Z',
      },
    });
    expect(emu.count({ path: statusPath })).toBe(1);
    expect(emu.count({ path: detailsPath })).toBe(1);
    const call = emu.requests.find((r) => statusPath.test(r.path))!;
    expect(call.headers.authorization).toMatch(/^Bearer ey/);
    expect(call.headers.accept).toBe('application/json');
    expect(call.headers['user-agent']).toBe(TEST_USER_AGENT);
    const token = emu.requests.find((r) => tokenPath.test(r.path))!;
    expect(token.body).toBe('grant_type=client_credentials');
    expect(token.headers.authorization).toMatch(/^Basic /);
  });

  it('never returns document numbers, dates of birth, names, addresses or image links', async () => {
    const out = await new JumioHandler(endpoints).execute(ctx(processed));
    expect(out.ok).toBe(true);
    const text = JSON.stringify(out.ok ? out.data : null);
    for (const value of Object.values(JUMIO_FIXTURE_PII)) expect(text).not.toContain(value);
    for (const key of ['documentNumber', 'dateOfBirth', 'firstName', 'lastName', 'address', 'href', 'data', 'credentials']) {
      expect(text).not.toContain(`"${key}"`);
    }
  });

  it('drops anything in the details that is not a strict enum, number or timestamp', async () => {
    const hostile = {
      completedAt: 'AIKO TANAKA 1991-11-03',
      decision: { type: 'jane.doe@example.com', details: { label: 'Document XK4471902' }, risk: { score: '50' } },
      capabilities: {
        'dob-1991': [{ decision: { type: 'PASSED' } }],
        extraction: [{ decision: { type: 'PASSED' }, data: { documentNumber: 'XK4471902' } }, { decision: { type: 'REJECTED' } }],
        similarity: { decision: { type: 'WARNING' } },
        liveness: [{ decision: { type: 'passed, born 1991' } }],
      },
    };
    // JSON.parse makes "__proto__" an own key, as a vendor body would.
    const body = JSON.parse(JSON.stringify(hostile).replace('"capabilities":{', '"capabilities":{"__proto__":[{"decision":{"type":"PASSED"}}],')) as object;
    emu.fault({ vendor: 'jumio', path: detailsPath, kind: 'status', status: 200, body });
    const out = await new JumioHandler(endpoints).execute(ctx(processed));
    expect(out.ok && out.data).toEqual({
      workflowExecutionId: JUMIO_EXECUTION_IDS.processed,
      status: 'PROCESSED',
      decision: { type: null, label: null, riskScore: null },
      // liveness's verdict is not in Jumio's form: not echoed, and not left out either (UNKNOWN: look at this)
      capabilities: { extraction: 'REJECTED', similarity: 'WARNING', liveness: 'UNKNOWN' },
      completedAt: null,
    });
  });

  it('an entry whose verdict cannot be read (no decision, a type not in Jumio\'s form) beside a PASSED one: UNKNOWN, never PASSED', async () => {
    const body = {
      workflow: { id: JUMIO_EXECUTION_IDS.processed, status: 'PROCESSED' },
      decision: { type: 'WARNING' },
      capabilities: {
        similarity: [{ decision: { type: 'PASSED' } }, { decision: null }],
        liveness: [{ decision: { type: 'PASSED' } }, { decision: { type: 'rejected' } }],
        usability: [{ decision: { type: 'PASSED' } }, 'PASSED'],
        extraction: [],
      },
    };
    emu.fault({ vendor: 'jumio', path: detailsPath, kind: 'status', status: 200, body });
    const out = await new JumioHandler(endpoints).execute(ctx(processed));
    expect(out.ok && out.data).toMatchObject({ capabilities: { similarity: 'UNKNOWN', liveness: 'UNKNOWN', usability: 'UNKNOWN' } });
    expect(out.ok && (out.data as { capabilities: object }).capabilities).not.toHaveProperty('extraction'); // no entry: nothing to say
  });

  it('a decision type Jumio has not documented never hides behind a known one: it is reported as the most severe', async () => {
    const body = {
      workflow: { id: JUMIO_EXECUTION_IDS.processed, status: 'PROCESSED' },
      decision: { type: 'REJECTED', details: { label: 'REJECTED' }, risk: { score: 90 } },
      capabilities: {
        liveness: [{ decision: { type: 'PASSED', details: { label: 'OK' } } }, { decision: { type: 'FAILED', details: { label: 'MANIPULATED' } } }],
        usability: [{ decision: { type: 'MANUAL_REVIEW' } }, { decision: { type: 'REJECTED' } }],
        similarity: [{ decision: { type: 'PASSED' } }, { decision: { type: 'WARNING' } }],
      },
    };
    emu.fault({ vendor: 'jumio', path: detailsPath, kind: 'status', status: 200, body });
    const out = await new JumioHandler(endpoints).execute(ctx(processed));
    expect(out.ok && out.data).toMatchObject({ capabilities: { liveness: 'FAILED', usability: 'MANUAL_REVIEW', similarity: 'WARNING' } });
  });

  it('an answer about another workflow execution or account (a cache or proxy mixing answers up) is never handed back as this one\'s verdict', async () => {
    const other = 'a1b2c3d4-0000-4c5d-8e9f-0000000000f2';
    const otherAccount = 'f3b1c2d4-5e6f-4a70-8b9c-0d1e2f3a4bff';
    const verdict = { completedAt: '2026-08-04T11:03:41.000Z', decision: { type: 'PASSED', details: { label: 'PASSED' } }, capabilities: { similarity: [{ decision: { type: 'PASSED' } }] } };
    const cases: { path: RegExp; body: Record<string, unknown>; message: RegExp }[] = [
      { path: statusPath, body: { account: { id: JUMIO_ACCOUNT_IDS.primary }, workflowExecution: { id: other, status: 'PROCESSED' } }, message: /another workflow execution/ },
      { path: statusPath, body: { account: { id: otherAccount }, workflowExecution: { id: JUMIO_EXECUTION_IDS.processed, status: 'PROCESSED' } }, message: /another workflow execution/ },
      { path: detailsPath, body: { workflow: { id: other, status: 'PROCESSED' }, account: { id: JUMIO_ACCOUNT_IDS.primary }, ...verdict }, message: /details of another workflow execution/ },
      { path: detailsPath, body: { workflow: { id: JUMIO_EXECUTION_IDS.processed, status: 'PROCESSED' }, account: { id: otherAccount }, ...verdict }, message: /details of another workflow execution/ },
    ];
    for (const c of cases) {
      emu.reset();
      emu.fault({ vendor: 'jumio', path: c.path, kind: 'status', status: 200, body: c.body });
      const out = failure(await new JumioHandler(endpoints, new TokenCache()).execute(ctx(processed)));
      expect(out, JSON.stringify(c.body)).toMatchObject({ kind: 'bad_response', vendorStatus: 200 });
      expect(out.message).toMatch(c.message);
    }
    // The same ids in upper case are the same execution and account (Jumio reads a UUID's hex digits alike).
    emu.reset();
    emu.fault({ vendor: 'jumio', path: detailsPath, kind: 'status', status: 200, body: { workflow: { id: JUMIO_EXECUTION_IDS.processed.toUpperCase() }, account: { id: JUMIO_ACCOUNT_IDS.primary.toUpperCase() }, ...verdict } });
    expect(await new JumioHandler(endpoints, new TokenCache()).execute(ctx(processed))).toMatchObject({ ok: true, data: { workflowExecutionId: JUMIO_EXECUTION_IDS.processed, decision: { type: 'PASSED' } } });
  });

  it('not yet PROCESSED: status only, no details request', async () => {
    const out = await new JumioHandler(endpoints).execute(ctx({ workflowExecutionId: JUMIO_EXECUTION_IDS.initiated }));
    expect(out).toEqual({ ok: true, vendorStatus: 200, data: { workflowExecutionId: JUMIO_EXECUTION_IDS.initiated, status: 'INITIATED' } });
    expect(emu.count({ path: detailsPath })).toBe(0);
  });

  it('includeDetails: false skips the details fetch', async () => {
    const out = await new JumioHandler(endpoints).execute(ctx({ ...processed, includeDetails: false }));
    expect(out).toEqual({ ok: true, vendorStatus: 200, data: { workflowExecutionId: JUMIO_EXECUTION_IDS.processed, status: 'PROCESSED' } });
    expect(emu.count({ path: detailsPath })).toBe(0);
  });
});

describe('JumioHandler tokens', () => {
  it('fetches ONE token for many calls', async () => {
    const handler = new JumioHandler(endpoints, new TokenCache());
    for (let i = 0; i < 3; i++) expect((await handler.execute(ctx(processed))).ok).toBe(true);
    await Promise.all(Array.from({ length: 10 }, () => handler.execute(ctx({ workflowExecutionId: JUMIO_EXECUTION_IDS.initiated }))));
    expect(jumio.tokenRequests).toBe(1);
  });

  it('refreshes ahead of expiry (injected clock)', async () => {
    let now = Date.now();
    const handler = new JumioHandler(endpoints, new TokenCache({ now: () => now }));
    await handler.execute(ctx(processed));
    now += 3_539_000;
    await handler.execute(ctx(processed));
    expect(jumio.tokenRequests).toBe(1);
    now += 2_000;
    await handler.execute(ctx(processed));
    expect(jumio.tokenRequests).toBe(2);
  });

  it('a token endpoint that answers 429 (Retry-After: 5) in the refresh margin is not asked again for 5 s; the cached token keeps serving', async () => {
    let now = Date.now();
    const handler = new JumioHandler(endpoints, new TokenCache({ now: () => now }));
    await handler.execute(ctx(processed));
    now += 3_550_000; // inside the 60 s margin of the 3600 s token
    emu.fault({ vendor: 'jumio', path: tokenPath, kind: 'status', status: 429, headers: { 'retry-after': '5' }, times: Infinity });
    for (let i = 0; i < 20; i++) {
      expect((await handler.execute(ctx(processed))).ok).toBe(true);
      now += 100;
    }
    // The first token, and one refresh in 2 s (a 1 s wait, Retry-After unheeded, would have let a second through).
    expect(emu.count({ path: tokenPath })).toBe(2);
    now += 4_000; // past the Retry-After
    emu.clearFaults();
    expect((await handler.execute(ctx(processed))).ok).toBe(true);
    await new Promise((r) => setTimeout(r, 50));
    expect(emu.count({ path: tokenPath })).toBe(3);
  });

  it('401 on the API: refresh once, retry once', async () => {
    const handler = new JumioHandler(endpoints, new TokenCache());
    await handler.execute(ctx(processed));
    jumio.expireAllTokens();
    expect((await handler.execute(ctx(processed))).ok).toBe(true);
    expect(jumio.tokenRequests).toBe(2);
    expect(emu.count({ path: statusPath })).toBe(3);
  });

  it('20 concurrent calls with an expired token cause exactly one refresh', async () => {
    const handler = new JumioHandler(endpoints, new TokenCache());
    await handler.execute(ctx(processed));
    jumio.expireAllTokens();
    const outs = await Promise.all(Array.from({ length: 20 }, () => handler.execute(ctx(processed))));
    expect(outs.every((o) => o.ok)).toBe(true);
    expect(jumio.tokenRequests).toBe(2);
    expect(emu.count({ path: tokenPath })).toBe(2);
  });

  it('a 401 that persists after the refresh → auth', async () => {
    emu.fault({ vendor: 'jumio', path: statusPath, kind: 'status', status: 401, times: 2 });
    const out = failure(await new JumioHandler(endpoints, new TokenCache()).execute(ctx(processed)));
    expect(out).toMatchObject({ kind: 'auth', vendorStatus: 401 });
    expect(jumio.tokenRequests).toBe(2);
  });

  it('wrong client secret → auth, nothing reaches retrieval, no secret in the message', async () => {
    const out = failure(await new JumioHandler(endpoints).execute(ctx(processed, { ...CREDS, clientSecret: 'wrong-secret-xyz' })));
    expect(out).toMatchObject({ kind: 'auth', vendorStatus: 401, requestSent: false });
    expect(out.message).not.toContain('wrong-secret-xyz');
    expect(emu.count({ path: statusPath })).toBe(0);
  });

  it('a missing User-Agent is refused by Jumio with 403 → auth', async () => {
    const out = failure(await new JumioHandler({ ...endpoints, userAgent: '' }).execute(ctx(processed)));
    expect(out).toMatchObject({ kind: 'auth', vendorStatus: 403 });
  });
});

describe('JumioHandler failures', () => {
  it('403 → auth without a refresh', async () => {
    emu.fault({ vendor: 'jumio', path: statusPath, kind: 'status', status: 403 });
    expect(failure(await new JumioHandler(endpoints, new TokenCache()).execute(ctx(processed)))).toMatchObject({ kind: 'auth', vendorStatus: 403 });
    expect(jumio.tokenRequests).toBe(1);
  });

  it('unknown execution → not_found', async () => {
    const out = failure(await new JumioHandler(endpoints).execute(ctx({ workflowExecutionId: JUMIO_EXECUTION_IDS.unknown })));
    expect(out).toMatchObject({ kind: 'not_found', vendorStatus: 404 });
  });

  it('429 without Retry-After → rate_limited, wait one slot of the 15 requests/s retrieval limit (67 ms)', async () => {
    emu.fault({ vendor: 'jumio', path: statusPath, kind: 'status', status: 429 });
    expect(failure(await new JumioHandler(endpoints).execute(ctx(processed)))).toMatchObject({ kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 67 });
  });

  it('429 with a Retry-After → that wait', async () => {
    emu.fault({ vendor: 'jumio', path: statusPath, kind: 'status', status: 429, headers: { 'retry-after': '2' } });
    expect(failure(await new JumioHandler(endpoints).execute(ctx(processed)))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 2000 });
  });

  it('429 from the token endpoint → rate_limited, wait one slot of its 10 requests/s (100 ms); nothing sent to retrieval', async () => {
    emu.fault({ vendor: 'jumio', path: tokenPath, kind: 'status', status: 429 });
    expect(failure(await new JumioHandler(endpoints, new TokenCache()).execute(ctx(processed)))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 100, requestSent: false });
    expect(emu.count({ path: statusPath })).toBe(0);
  });

  it('500 on details → server_error', async () => {
    emu.fault({ vendor: 'jumio', path: detailsPath, kind: 'status', status: 500 });
    expect(failure(await new JumioHandler(endpoints).execute(ctx(processed)))).toMatchObject({ kind: 'server_error', vendorStatus: 500 });
  });

  it('canonicalParams: a valid id in upper (or mixed) case becomes lower case; anything else is left as it is', () => {
    const handler = new JumioHandler(endpoints);
    const upper = JUMIO_EXECUTION_IDS.processed.toUpperCase();
    expect(handler.canonicalParams('kyc', 'get_status', { workflowExecutionId: upper, includeDetails: false })).toEqual({
      workflowExecutionId: JUMIO_EXECUTION_IDS.processed,
      includeDetails: false,
    });
    const mixed = `A1b2C3d4${JUMIO_EXECUTION_IDS.processed.slice(8)}`;
    expect(handler.canonicalParams('kyc', 'get_status', { workflowExecutionId: mixed })).toEqual({ workflowExecutionId: JUMIO_EXECUTION_IDS.processed });
    for (const params of [processed, { workflowExecutionId: '../../ACCOUNTS' }, { workflowExecutionId: `${upper}X` }, { workflowExecutionId: 42 }, {}]) {
      expect(handler.canonicalParams('kyc', 'get_status', params)).toBe(params);
    }
    const other = { workflowExecutionId: upper };
    expect(handler.canonicalParams('kyc', 'other', other)).toBe(other);
  });

  it('withDefaults: includeDetails left out is spelled out as its default (true), so a rule on it sees the call', () => {
    const handler = new JumioHandler(endpoints);
    expect(handler.withDefaults('kyc', 'get_status', processed)).toEqual({ ...processed, includeDetails: true });
    expect(processed).not.toHaveProperty('includeDetails'); // a copy: the caller's params are not changed
    for (const includeDetails of [true, false]) {
      const given = { ...processed, includeDetails };
      expect(handler.withDefaults('kyc', 'get_status', given)).toBe(given);
    }
    expect(handler.withDefaults('kyc', 'other', processed)).toBe(processed);
  });

  it('the upper-case id, once canonical, asks Jumio for the lower-case one', async () => {
    const handler = new JumioHandler(endpoints, new TokenCache());
    const params = handler.canonicalParams('kyc', 'get_status', { workflowExecutionId: JUMIO_EXECUTION_IDS.processed.toUpperCase() });
    const out = await handler.execute(ctx(params));
    expect(out.ok && out.data).toMatchObject({ workflowExecutionId: JUMIO_EXECUTION_IDS.processed, status: 'PROCESSED' });
    expect(emu.requests.filter((r) => statusPath.test(r.path) || detailsPath.test(r.path)).map((r) => r.path.split('/').includes(JUMIO_EXECUTION_IDS.processed))).toEqual([true, true]);
  });

  it('canonicalParams: a valid accountId in upper case becomes lower case too, alone or with the id', () => {
    const handler = new JumioHandler(endpoints);
    const account = JUMIO_ACCOUNT_IDS.second;
    expect(handler.canonicalParams('kyc', 'get_status', { ...processed, accountId: account.toUpperCase() })).toEqual({ ...processed, accountId: account });
    expect(handler.canonicalParams('kyc', 'get_status', { workflowExecutionId: JUMIO_EXECUTION_IDS.processed.toUpperCase(), accountId: account.toUpperCase() })).toEqual({
      ...processed,
      accountId: account,
    });
    expect(handler.canonicalParam('kyc', 'get_status', 'accountId', account.toUpperCase())).toBe(account);
    for (const params of [{ ...processed, accountId: account }, { ...processed, accountId: '../../ACCOUNTS' }, { ...processed, accountId: 42 }]) {
      expect(handler.canonicalParams('kyc', 'get_status', params)).toBe(params);
    }
  });

  it('accountId names the account the execution is asked for under; without it the credentials\' default account is used', async () => {
    // A handler (and token cache) per step: emu.reset() forgets the tokens it minted.
    const handler = () => new JumioHandler(endpoints, new TokenCache());
    const second = await handler().execute(ctx({ workflowExecutionId: JUMIO_EXECUTION_IDS.secondProcessed, accountId: JUMIO_ACCOUNT_IDS.second }));
    expect(second.ok && second.data).toMatchObject({ workflowExecutionId: JUMIO_EXECUTION_IDS.secondProcessed, status: 'PROCESSED' });
    const asked = () => emu.requests.filter((r) => statusPath.test(r.path) || detailsPath.test(r.path)).map((r) => r.path.split('/')[4]);
    expect(asked()).toEqual([JUMIO_ACCOUNT_IDS.second, JUMIO_ACCOUNT_IDS.second]);
    emu.reset();
    expect((await handler().execute(ctx(processed))).ok).toBe(true);
    expect(asked()).toEqual([JUMIO_ACCOUNT_IDS.primary, JUMIO_ACCOUNT_IDS.primary]);
    // Under the default account the second end user's execution is not found, as at Jumio.
    emu.reset();
    expect(failure(await handler().execute(ctx({ workflowExecutionId: JUMIO_EXECUTION_IDS.secondProcessed })))).toMatchObject({ kind: 'not_found', vendorStatus: 404 });
  });

  it('a non-UUID accountId never leaves the gateway, whatever the credentials say', async () => {
    const out = failure(await new JumioHandler(endpoints).execute(ctx({ ...processed, accountId: '../../accounts' })));
    expect(out).toMatchObject({ kind: 'rejected', requestSent: false, message: 'accountId: must be a UUID' });
    expect(emu.requests).toHaveLength(0);
  });

  it('a non-UUID id never leaves the gateway', async () => {
    const out = failure(await new JumioHandler(endpoints).execute(ctx({ workflowExecutionId: '../../accounts' })));
    expect(out).toMatchObject({ kind: 'rejected', requestSent: false });
    expect(emu.requests).toHaveLength(0);
  });
});
