import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LEDGER_EVENT_TYPES } from '../../src/ledger/ledger-event-types.js';
import { TOOL_CALL_STATUSES } from '../../src/tool-calls/tool-call-status.js';
import { listRoutes } from '../support/routes.js';
import { approvalFor } from '../approvals/support.js';
import { insertCalls } from '../ops/ledger-seed.js';
import { CREDENTIALS, setupOrg, shopDomainOf, startHarness, toolUse, type Harness, type OrgSetup, type Vendor } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';
import { expectPrototypeClean, expectSane, runs } from './hostile.support.js';
import { postToolUse } from './support.js';

/**
 * Property-based hostile input (fast-check), in-process for speed: whatever
 * the body, params, filters, cursors or headers, the gateway answers without
 * a 5xx, keeps serving, and leaves Object.prototype alone.
 */

// ---- generators -----------------------------------------------------------

const PROTO_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', '__defineGetter__', 'polluted'];
const NASTY_TEXT = ['\u0000', '\ud800', '\udfff', '\udc00\ud800', '\u202e', '\ufeff', '\u200b', 'о', 'ｏ', '\\', '"', '\n', "' OR 1=1 --", '%00', '../', '{{7*7}}', '${x}'];

const nastyString = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 12 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 12 }) },
  { weight: 2, arbitrary: fc.constantFrom(...NASTY_TEXT) },
  { weight: 2, arbitrary: fc.tuple(fc.string({ maxLength: 6 }), fc.constantFrom(...NASTY_TEXT), fc.string({ maxLength: 6 })).map((a) => a.join('')) },
);
const weirdKey = fc.oneof({ weight: 2, arbitrary: fc.constantFrom(...PROTO_KEYS, 'action', 'orderId', 'path', '') }, { weight: 3, arbitrary: nastyString });

/** JSON text (not values: a "__proto__" key must reach the server literally). */
const jsonScalarText = fc.oneof(
  fc.jsonValue({ maxDepth: 0 }).map((v) => JSON.stringify(v)),
  nastyString.map((s) => JSON.stringify(s)),
  fc.constantFrom('1e309', '-0', '-1e309', '123456789012345678901234567890', '0.1e-400', '9007199254740993', 'true', 'null'),
);
const { json: jsonText } = fc.letrec<{ json: string; arr: string; obj: string }>((tie) => ({
  json: fc.oneof({ depthSize: 'small', withCrossShrink: true }, jsonScalarText, tie('arr'), tie('obj')),
  arr: fc.array(tie('json'), { maxLength: 4 }).map((items) => `[${items.join(',')}]`),
  obj: fc.array(fc.tuple(weirdKey, tie('json')), { maxLength: 5 }).map((es) => `{${es.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`),
}));
/** Header values Node's client can send: tab, printable ASCII and latin-1. */
const headerChar = fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0x80, max: 0xff }), fc.constant(9)).map((c) => String.fromCharCode(c));
const headerValue = fc.oneof(fc.string({ unit: headerChar, maxLength: 300 }), fc.constantFrom('', ' ', 'a'.repeat(256), 'key:with:colons', 'null', 'undefined'));

/** Percent-encodes any string byte by byte (encodeURIComponent throws on lone surrogates). */
const pct = (s: string): string => [...Buffer.from(s, 'utf8')].map((b) => (/[A-Za-z0-9_.~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0')}`)).join('');
const rawQueryValue = fc.oneof(
  { weight: 4, arbitrary: nastyString.map(pct) },
  { weight: 1, arbitrary: fc.constantFrom('%', '%zz', '%ED%A0%80', '%C0%AE', '%FF', '+', '%2B', '1e2', '-1', '0', '201', '99999999999999999999', '2024-01-01', '2024-13-45T99:99', 'now', '') },
  { weight: 1, arbitrary: fc.uuid().map((u) => u) },
);

// ---- the suite --------------------------------------------------------------

describe('hostile input: property-based (fast-check)', () => {
  let h: Harness;
  let org: OrgSetup;
  let ops: string;
  let expert: string;
  let catalog: { name: string; actions: { name: string }[] }[];
  const cursors: Record<string, string> = {};
  const keyFor = (who: 'agent' | 'ops' | 'expert' | 'admin' | 'orgAdmin') =>
    ({ agent: org.agentKey, ops, expert, admin: adminAuth.Authorization.slice(7), orgAdmin: org.adminKey })[who];

  beforeAll(async () => {
    h = await startHarness();
    const vendors: Vendor[] = ['shopify', 'amazon', 'jumio', 'nango'];
    catalog = (await h.t.http.get('/v1/tools').set(adminAuth)).body.items;
    const tools = catalog.flatMap((t) => t.actions.map((a) => `${t.name}.${a.name}`));
    org = await setupOrg(h.t, { tools, vendors });
    ops = (await createKey(h.t, org.orgId, 'ops')).key;
    expert = (await createKey(h.t, org.orgId, 'expert')).key;
    for (let i = 0; i < 3; i++) {
      await postToolUse(h.t.http, org.runId, org.agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
      await postToolUse(h.t.http, org.runId, org.agentKey, toolUse('shopify_refund', { action: 'create', orderId: '450789469', amount: '1.00' }));
    }
    cursors.toolCalls = (await h.t.http.get('/v1/tool-calls?limit=1').set(bearer(ops))).body.nextCursor;
    cursors.events = (await h.t.http.get('/v1/ledger/events?limit=1').set(bearer(ops))).body.nextCursor;
    cursors.approvals = (await h.t.http.get('/v1/approvals?limit=1').set(bearer(expert))).body.nextCursor;
    for (const [k, c] of Object.entries(cursors)) expect(typeof c, k).toBe('string');
  }, 90_000);
  afterAll(async () => {
    await h?.close();
  });
  afterEach(async () => {
    expectPrototypeClean();
    expect((await h.t.http.get('/healthz')).status).toBe(200);
  });

  it('arbitrary JSON bodies (weird keys, unicode, NUL, huge numbers) on the tool-call route, with arbitrary headers', async () => {
    // Mostly a well-formed tool_use block whose input is hostile, so most runs get past the envelope check into
    // governance, the ledger and the vendors; now and then a broken envelope (bad id, extra top-level key, bad header).
    const toolUseId = fc.oneof(
      { weight: 8, arbitrary: fc.uuid().map((u) => JSON.stringify(`toolu_${u}`)) }, // a fresh id: a new call, not a replay
      { weight: 1, arbitrary: fc.constant('"toolu_x"') },
      { weight: 1, arbitrary: jsonScalarText },
    );
    const toolName = fc.oneof(
      { weight: 12, arbitrary: fc.constantFrom('"order_lookup"', '"nango_proxy"', '"shopify_order"', '"kyc"') },
      { weight: 1, arbitrary: fc.constantFrom('"оrder_lookup"', '"order_lookup "', '"ORDER_LOOKUP"') },
      { weight: 1, arbitrary: jsonScalarText },
    );
    const action = fc.oneof({ weight: 4, arbitrary: fc.constantFrom('"lookup"', '"get"', '"add_note"', '"get_status"') }, { weight: 1, arbitrary: jsonScalarText });
    // Values inside `input`: the same hostile JSON but without numbers too big for a double (1e309) or numbers a
    // double would round (9007199254740993, 0.1e-400): either refuses the whole body with 400, and a nested value
    // holds many numbers, so it would be most bodies. jsonText below keeps some.
    const inputScalar = fc.oneof(
      fc.jsonValue({ maxDepth: 0 }).map((v) => JSON.stringify(v)),
      nastyString.map((x) => JSON.stringify(x)),
      fc.constantFrom('-0', '0e-400', '9007199254740992', 'true', 'null'),
    );
    const { json: inputValue } = fc.letrec<{ json: string; arr: string; obj: string }>((tie) => ({
      json: fc.oneof({ depthSize: 'small', withCrossShrink: true }, inputScalar, tie('arr'), tie('obj')),
      arr: fc.array(tie('json'), { maxLength: 4 }).map((items) => `[${items.join(',')}]`),
      obj: fc.array(fc.tuple(weirdKey, tie('json')), { maxLength: 5 }).map((es) => `{${es.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`),
    }));
    const input = fc.oneof(
      // the weird keys (prototype names, NUL, surrogates, '') and values live here, inside `input`
      {
        weight: 8,
        arbitrary: fc
          .tuple(action, fc.oneof(fc.constantFrom('"12345"', '"1001"'), inputScalar), fc.array(fc.tuple(weirdKey, inputValue), { maxLength: 3 }))
          .map(([a, o, extra]) => `{${[['action', a], ['orderId', o], ...extra].map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`),
      },
      { weight: 1, arbitrary: jsonText },
    );
    const envelope = fc
      .tuple(
        toolUseId,
        toolName,
        input,
        fc.oneof({ weight: 9, arbitrary: fc.constant<[string, string][]>([]) }, { weight: 1, arbitrary: fc.array(fc.tuple(weirdKey, jsonText), { minLength: 1, maxLength: 2 }) }),
      )
      .map(([id, name, inp, extra]) =>
        `{${[['type', '"tool_use"'], ['id', id], ['name', name], ['input', inp], ...extra].map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`,
      );
    const body = fc.oneof({ weight: 9, arbitrary: envelope }, { weight: 1, arbitrary: jsonText });
    const rarely = (v: fc.Arbitrary<string>) => fc.oneof({ weight: 8, arbitrary: fc.constant(null) }, { weight: 2, arbitrary: v });
    const headers = fc.record({ idem: rarely(headerValue), cid: rarely(headerValue) });
    const outcomes: Record<string, number> = {};
    let runsDone = 0;
    let recorded = 0;
    await fc.assert(
      fc.asyncProperty(body, headers, async (text, hd) => {
        const req = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set({ ...bearer(org.agentKey), 'Content-Type': 'application/json' });
        if (hd.idem !== null) req.set('Idempotency-Key', hd.idem);
        if (hd.cid !== null) req.set('X-Correlation-Id', hd.cid);
        const res = await req.send(text);
        expectSane(res, text);
        expectPrototypeClean();
        runsDone++;
        const got = res.body as { toolCallId?: unknown; status?: unknown; code?: unknown };
        if (typeof got?.toolCallId === 'string') recorded++;
        const k = `${res.status} ${String(got?.status ?? got?.code ?? '')}`;
        outcomes[k] = (outcomes[k] ?? 0) + 1;
      }),
      runs(200),
    );
    // Not 200 envelope rejections: most bodies reached the ledger (a recorded call of any outcome has a toolCallId).
    expect(runsDone).toBe(runs(200).numRuns);
    expect(recorded / runsDone, JSON.stringify(outcomes)).toBeGreaterThanOrEqual(0.3);
    expect(Object.keys(outcomes).filter((k) => !k.startsWith('400 ')).length, JSON.stringify(outcomes)).toBeGreaterThanOrEqual(3);
  }, 120_000);

  it('valid tool_use blocks, mutated: tool names, actions and params reach governance, the ledger and the vendors safely', async () => {
    // One valid input per action; each run mutates one of them a little (the interesting inputs are near-valid ones).
    const VALID: [string, Record<string, unknown>][] = [
      ['order_lookup', { action: 'lookup', orderId: '12345' }],
      ['shopify_query', { action: 'get_product', productId: '632910392' }],
      ['shopify_order', { action: 'add_note', orderId: '1001', note: 'hello' }],
      ['shopify_refund', { action: 'create', orderId: '450789469', amount: '1.00' }],
      ['amazon_query', { action: 'get_order', orderId: '112-0000001-1234567' }],
      ['amazon_query', { action: 'get_order_items', orderId: '112-0000001-1234567' }],
      ['kyc', { action: 'get_status', workflowExecutionId: 'a1b2c3d4-0000-4c5d-8e9f-000000000003' }],
      ['nango_proxy', { action: 'get', path: 'v1/orders', query: { a: '1' } }],
      ['nango_proxy', { action: 'post', path: 'v1/orders', body: { a: 1 } }],
    ];
    const value = fc.oneof(nastyString, fc.jsonValue({ maxDepth: 2 }), fc.constantFrom('12345', '-1', '1e2', '0.001', '99999999999999.99', 'v1/../x'));
    const mutation = fc.oneof(
      fc.tuple(fc.constant('add' as const), weirdKey, value),
      fc.tuple(fc.constant('set' as const), fc.nat(), value),
      fc.tuple(fc.constant('drop' as const), fc.nat(), fc.constant(null)),
      fc.tuple(fc.constant('action' as const), fc.constant(''), value),
      fc.tuple(fc.constant('name' as const), fc.constant(''), fc.oneof(nastyString, fc.constantFrom('оrder_lookup', 'order_lookup ', 'kyc.get_status', 'nango_proxy'))),
    );
    const use = fc.record({
      base: fc.constantFrom(...VALID),
      mutations: fc.array(mutation, { maxLength: 3 }),
      id: fc.oneof({ weight: 5, arbitrary: fc.stringMatching(/^toolu_[A-Za-z0-9]{8}$/) }, { weight: 1, arbitrary: nastyString }),
    });
    await fc.assert(
      fc.asyncProperty(use, async ({ base, mutations, id }) => {
        let name = base[0];
        const input: Record<string, unknown> = JSON.parse(JSON.stringify(base[1])) as Record<string, unknown>;
        for (const [kind, k, v] of mutations) {
          const keys = Object.keys(input);
          if (kind === 'add') Object.defineProperty(input, k as string, { value: v, enumerable: true, writable: true, configurable: true });
          else if (kind === 'set') input[keys[(k as number) % keys.length]] = v;
          else if (kind === 'drop') delete input[keys[(k as number) % keys.length]];
          else if (kind === 'action') input.action = v;
          else name = String(v);
        }
        const body = { type: 'tool_use', id, name, input };
        const res = await postToolUse(h.t.http, org.runId, org.agentKey, body);
        expectSane(res, JSON.stringify(body));
        if (res.body && 'toolCallId' in res.body) {
          expect(typeof res.body.toolResult.content).toBe('string');
          expect(res.body.toolResult.content).not.toMatch(/shpat_|Atzr\||\bat \/|\.js:\d/);
        }
        expectPrototypeClean();
      }),
      runs(250),
    );
  }, 120_000);

  it('arbitrary filters and query strings on the listing routes', async () => {
    const FILTER_KEYS = ['orgId', 'runId', 'status', 'toolName', 'action', 'errorCode', 'correlationId', 'since', 'until', 'limit', 'cursor', 'type', 'kind', 'format', 'from', 'to', 'waitMs', 'format'];
    const paths = [
      '/v1/tool-calls',
      '/v1/tool-calls/export',
      '/v1/ledger/events',
      '/v1/ledger/verify',
      '/v1/approvals',
      '/v1/api-keys',
      () => `/v1/orgs/${org.orgId}/usage`,
      () => `/v1/runs/${org.runId}/tools`,
      () => `/v1/runs/${org.runId}`,
    ];
    const query = fc.array(fc.tuple(fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...FILTER_KEYS) }, { weight: 1, arbitrary: nastyString.map(pct) }), rawQueryValue), { maxLength: 5 });
    const who = fc.constantFrom('agent', 'ops', 'expert', 'admin', 'orgAdmin') as fc.Arbitrary<'agent' | 'ops' | 'expert' | 'admin' | 'orgAdmin'>;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...paths), query, who, async (p, q, role) => {
        const path = typeof p === 'function' ? p() : p;
        const url = `${path}?${q.map(([k, v]) => `${k}=${v}`).join('&')}`;
        const res = await h.t.http.get(url).set(bearer(keyFor(role)));
        expectSane(res, `${role} GET ${url}`);
        expectPrototypeClean();
      }),
      runs(200),
    );
  }, 120_000);

  it('filter values, valid-shaped and hostile, on the parameters each listing takes, reach its query', async () => {
    // The property above mostly meets the early refusals (role, unknown parameter): this one sends each route only the
    // parameters it takes, as its role, mostly well-formed values with hostile ones mixed in, so the values reach the
    // parsing of times and cursors and the SQL behind the listing.
    const iso = fc
      .date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2099-12-31T23:59:59Z'), noInvalidDate: true })
      .chain((d) => fc.constantFrom(d.toISOString(), d.toISOString().slice(0, 19), d.toISOString().slice(0, 10), d.toISOString().replace('Z', '+05:30'), d.toISOString().replace('.', '.123456789').slice(0, 29) + 'Z'))
      .map(pct);
    const text = fc.oneof(fc.constantFrom('order_lookup', 'shopify_refund', 'lookup', 'create', 'POLICY_BLOCKED', 'VENDOR_ERROR', 'x'), fc.stringMatching(/^[A-Za-z0-9_.:-]{1,40}$/));
    // Built inside the test: the org, its run and the cursors exist by now.
    const limit = fc.integer({ min: 1, max: 200 }).map(String);
    const runId = fc.oneof(fc.constant(org.runId), fc.uuid());
    const filters = {
      since: iso,
      until: iso,
      orgId: fc.constant(org.orgId),
      runId,
      status: fc.constantFrom(...TOOL_CALL_STATUSES),
      toolName: text,
      action: text,
      errorCode: text,
      correlationId: fc.oneof(fc.uuid(), text),
    };
    const routes: { path: string; role: 'agent' | 'ops' | 'expert' | 'admin'; keys: Record<string, fc.Arbitrary<string>> }[] = [
      { path: '/v1/tool-calls', role: 'ops', keys: { ...filters, limit, cursor: fc.constant(cursors.toolCalls) } },
      { path: '/v1/tool-calls/export', role: 'ops', keys: { ...filters, format: fc.constantFrom('ndjson', 'csv') } },
      {
        path: '/v1/ledger/events',
        role: 'ops',
        keys: { since: iso, until: iso, orgId: filters.orgId, runId, type: fc.constantFrom(...LEDGER_EVENT_TYPES), limit, cursor: fc.constant(cursors.events) },
      },
      { path: '/v1/ledger/verify', role: 'ops', keys: { orgId: filters.orgId } },
      { path: `/v1/orgs/${org.orgId}/usage`, role: 'ops', keys: { from: iso, to: iso } },
      {
        path: '/v1/approvals',
        role: 'expert',
        keys: {
          status: fc.constantFrom('pending', 'approved', 'rejected', 'expired'),
          kind: fc.constantFrom('expert', 'client'),
          orgId: filters.orgId,
          runId,
          limit,
          cursor: fc.constant(cursors.approvals),
        },
      },
      { path: '/v1/api-keys', role: 'admin', keys: { orgId: fc.constantFrom(org.orgId, 'platform'), limit } },
      { path: `/v1/runs/${org.runId}/tools`, role: 'agent', keys: { format: fc.constantFrom('anthropic', 'openai') } },
    ];
    const request = fc.integer({ min: 0, max: routes.length - 1 }).chain((r) => {
      const names = Object.keys(routes[r].keys);
      const value = (k: string) => fc.oneof({ weight: 4, arbitrary: routes[r].keys[k] }, { weight: 1, arbitrary: rawQueryValue });
      return fc.tuple(
        fc.constant(routes[r]),
        fc.uniqueArray(fc.constantFrom(...names), { minLength: 1, maxLength: Math.min(3, names.length) }).chain((ks) => fc.tuple(...ks.map((k) => value(k).map((v) => [k, v] as const)))),
      );
    });
    const seen: Record<number, number> = {};
    let total = 0;
    await fc.assert(
      fc.asyncProperty(request, async ([route, q]) => {
        const url = `${route.path}?${q.map(([k, v]) => `${k}=${v}`).join('&')}`;
        const res = await h.t.http.get(url).set(bearer(keyFor(route.role)));
        expectSane(res, `${route.role} GET ${url}`);
        expectPrototypeClean();
        seen[res.status] = (seen[res.status] ?? 0) + 1;
        total++;
      }),
      runs(200),
    );
    // The values reached the listings: most runs were answered (200), and some were refused by the validation (400).
    expect((seen[200] ?? 0) / total, JSON.stringify(seen)).toBeGreaterThanOrEqual(0.3);
    expect(seen[400] ?? 0, JSON.stringify(seen)).toBeGreaterThan(0);
    expect(seen[403] ?? 0, JSON.stringify(seen)).toBe(0);
  }, 120_000);

  it('random, forged and mutated cursors are refused with 400', async () => {
    const listings = [
      { path: '/v1/tool-calls', key: () => ops, valid: () => cursors.toolCalls },
      { path: '/v1/ledger/events', key: () => ops, valid: () => cursors.events },
      { path: '/v1/approvals', key: () => expert, valid: () => cursors.approvals },
    ];
    const b64 = (s: string) => Buffer.from(s).toString('base64url');
    const cursor = (valid: string) =>
      fc.oneof(
        fc.string({ minLength: 1, maxLength: 200 }),
        fc.tuple(fc.jsonValue(), fc.base64String()).map(([j, sig]) => `${b64(JSON.stringify(j))}.${sig}`),
        fc.record({ v: fc.constant(1), k: fc.constantFrom('tool-calls', 'ledger-events', 'approvals'), o: fc.oneof(fc.uuid(), fc.constant('*')), f: fc.string(), t: fc.string(), i: fc.string() }).map(
          (p) => `${b64(JSON.stringify(p))}.${valid.split('.')[1]}`,
        ),
        fc.tuple(fc.nat({ max: valid.length - 1 }), fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 })).map(([i, ch]) => valid.slice(0, i) + ch + valid.slice(i + 1)),
        fc.nat({ max: valid.length - 1 }).map((i) => valid.slice(0, i)),
        fc.string({ minLength: 1, maxLength: 3 }).map((s) => valid + s),
        fc.constantFrom(...Object.values(cursors)),
      );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...listings).chain((l) => fc.tuple(fc.constant(l), cursor(l.valid()))),
        async ([l, c]) => {
          const res = await h.t.http.get(`${l.path}?limit=1&cursor=${pct(c)}`).set(bearer(l.key()));
          expectSane(res, `${l.path} cursor=${c}`);
          if (c === l.valid()) expect(res.status).toBe(200);
          else expect(res.status, `${l.path} cursor=${c}`).toBe(400);
        },
      ),
      runs(200),
    );
  }, 120_000);

  it('Authorization header variants never authenticate and never fail the server', async () => {
    const valid = org.agentKey;
    const auth = fc.oneof(
      headerValue,
      headerValue.map((v) => `Bearer ${v}`),
      fc.tuple(fc.nat({ max: valid.length - 1 }), fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 })).map(([i, ch]) => `Bearer ${valid.slice(0, i)}${ch}${valid.slice(i + 1)}`),
      fc.constantFrom(`bearer${valid}`, valid, `Bearer  ${valid}`, `Bearer ${valid} `, `Token ${valid}`, `Bearer ${valid}\t`),
    );
    await fc.assert(
      fc.asyncProperty(auth, fc.constantFrom('get', 'post'), async (a, method) => {
        const req = method === 'get' ? h.t.http.get('/v1/tool-calls') : h.t.http.post(`/v1/runs/${org.runId}/tool-calls`);
        const res = await req.set('Authorization', a).send(method === 'post' ? toolUse('order_lookup', { action: 'lookup', orderId: '1' }) : undefined);
        expectSane(res, a);
        // node trims the value, and the scheme is case-insensitive (RFC 9110 §11.1): genuinely the valid key
        if (/^bearer$/i.test(a.trim().slice(0, 6)) && a.trim().slice(6) === ` ${valid}`) return;
        expect(res.status, JSON.stringify(a)).toBe(401);
      }),
      runs(150),
    );
  }, 120_000);

  it('every route, with arbitrary path parameters and bodies (each route gets its own runs)', async () => {
    const routes = listRoutes(h.t.app).filter((r) => !['/metrics', '/docs', '/readyz', '/healthz'].includes(r.path));
    expect(routes.length).toBeGreaterThan(20);
    const FIELDS = ['name', 'reason', 'note', 'decision', 'actionDigest', 'status', 'enabled', 'orgId', 'role', 'items', 'rules', 'config', 'specialistId',
      'metadata', 'conversationId', 'toolUses', 'id', 'toolName', 'action', 'type', 'input', 'match', 'where', 'path', 'op', 'value'];
    const field = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...FIELDS) }, { weight: 1, arbitrary: weirdKey });
    const { val } = fc.letrec<{ val: unknown; obj: Record<string, unknown> }>((tie) => ({
      val: fc.oneof({ depthSize: 'small' }, nastyString, fc.jsonValue({ maxDepth: 0 }), fc.constantFrom('approve', 'admin', 'agent', 'shopify', 'allow', 'a'.repeat(64)), tie('obj'), fc.array(tie('val'), { maxLength: 3 })),
      obj: fc.array(fc.tuple(field, tie('val')), { maxLength: 4 }).map((es) => {
        const o: Record<string, unknown> = {};
        for (const [k, v] of es) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
        return o;
      }),
    }));
    const body = fc.oneof({ weight: 4, arbitrary: val.map((v) => JSON.stringify(v) ?? 'null') }, { weight: 1, arbitrary: jsonText });
    const segment = fc.oneof(
      { weight: 3, arbitrary: nastyString.filter((s) => s.length > 0).map(pct) },
      { weight: 1, arbitrary: fc.uuid() },
      { weight: 4, arbitrary: fc.constantFrom(() => org.orgId, () => org.runId, () => 'shopify', () => 'nango', () => 'tool_calling_enabled').map((f) => f()) },
    );
    // Each route with the keys its roles allow (an org's admin and the platform admin for 'admin'), so the runs
    // reach the handler instead of stopping at the role check.
    type Who = 'admin' | 'orgAdmin' | 'agent' | 'expert' | 'ops';
    const ROLE_REFUSED = /^this API key \(role \w+\) may not call this route/; // auth.guard.ts roleRefusal
    const allowed = (roles: string[] | undefined): Who[] =>
      roles === undefined ? ['admin', 'orgAdmin', 'agent', 'expert', 'ops'] : roles.flatMap((r): Who[] => (r === 'admin' ? ['admin', 'orgAdmin'] : [r as Who]));
    const perRoute = Math.max(50, runs(50).numRuns);
    for (const route of routes) {
      const outcomes: Record<number, number> = {};
      let runsDone = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(segment, { minLength: 3, maxLength: 3 }), body, fc.constantFrom(...allowed(route.roles)), async (segs, text, role) => {
          let i = 0;
          const path = route.path.replace(/:[A-Za-z]+/g, () => segs[i++ % segs.length]);
          const method = route.method.toLowerCase() as 'get' | 'post' | 'put' | 'delete' | 'patch';
          let req = h.t.http[method](path).set(bearer(keyFor(role)));
          if (method !== 'get' && method !== 'delete') req = req.set('Content-Type', 'application/json').send(text);
          const res = await req;
          expectSane(res, `${role} ${route.method} ${path} ${text.slice(0, 300)}`);
          expectPrototypeClean();
          // the key's role may call this route: the role check never refuses it
          expect(String((res.body as { detail?: unknown }).detail ?? ''), `${role} ${route.method} ${path} → ${res.text.slice(0, 300)}`).not.toMatch(ROLE_REFUSED);
          expect(res.status, `${role} ${route.method} ${path}`).not.toBe(401);
          runsDone++;
          outcomes[res.status] = (outcomes[res.status] ?? 0) + 1;
        }),
        { ...runs(50), numRuns: perRoute },
      );
      expect(runsDone, `${route.method} ${route.path}`).toBe(perRoute);
      // Not all refused before the handler: some runs got past auth and scoping to an answer of the route itself.
      expect(Object.keys(outcomes).filter((st) => st !== '403').length, `${route.method} ${route.path} ${JSON.stringify(outcomes)}`).toBeGreaterThan(0);
    }
  }, 300_000);

  it('every write route, with well-formed bodies carrying hostile values, reaches its handler', async () => {
    // The property above sends arbitrary bodies: most stop at validation. Here each write route gets the body it
    // takes, with any field swapped for a hostile value now and then (and now and then an extra key), on a target
    // that exists (a fresh run, approval or indeterminate call per run where the route consumes one), so the
    // handlers, their statements and the ledger see hostile values that pass validation, and validation sees
    // hostile values one field at a time.
    // Orgs of this test's own: the property above may have ended `org`'s run or turned its flag off.
    const gov = await setupOrg(h.t, { tools: ['order_lookup.lookup'] }); // the admin writes change this org's governance
    const calls = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] }); // its calls are batched, approved and reconciled
    const callsOps = (await createKey(h.t, calls.orgId, 'ops')).key;
    const expertKey = (await createKey(h.t, calls.orgId, 'expert')).key;
    const platform = keyFor('admin');
    const hostile = fc.oneof(
      { weight: 3, arbitrary: nastyString },
      { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
      { weight: 1, arbitrary: fc.constantFrom(null, '', 'x'.repeat(3000), -1, 1e308, [], {}, '__proto__', '00000000-0000-0000-0000-000000000000') },
    );
    /** the valid value, or now and then a hostile one */
    const f = <T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> => fc.oneof({ weight: 8, arbitrary: valid }, { weight: 1, arbitrary: hostile });
    /** optional fields: absent, or present (valid or hostile) */
    const opt = <T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> => fc.option(f(valid), { nil: undefined, freq: 2 });
    const text = fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), nastyString.filter((x) => x.length > 0));
    /** The object as JSON text, its absent fields left out and now and then one more key (a prototype name among them), sent literally. */
    const body = (fields: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<string> =>
      fc.tuple(fc.record(fields), fc.oneof({ weight: 7, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.tuple(weirdKey, hostile) })).map(([o, extra]) => {
        const entries = Object.entries(o).filter(([, v]) => v !== undefined);
        if (extra) entries.push(extra);
        return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v) ?? 'null'}`).join(',')}}`;
      });
    const freshRun = async (): Promise<string> => (await h.t.http.post('/v1/runs').set(bearer(gov.agentKey)).send({ specialistId: 'support' })).body.id as string;
    const toolUseArb = fc.record({
      type: f(fc.constant('tool_use')),
      id: f(fc.uuid().map((u) => `toolu_${u}`)),
      name: f(fc.constant('order_lookup')),
      input: f(fc.record({ action: f(fc.constant('lookup')), orderId: f(fc.constantFrom('12345', '450789469')) })),
    });
    interface WriteRoute {
      name: string;
      key: () => string;
      /** the path, with a fresh target when the route consumes one */
      path: () => Promise<string>;
      body: fc.Arbitrary<string>;
      method?: 'post' | 'put';
    }
    const routes: WriteRoute[] = [
      { name: 'POST /v1/orgs', key: () => platform, path: async () => '/v1/orgs', body: body({ name: f(text), id: opt(fc.uuid()) }) },
      {
        name: 'POST /v1/api-keys',
        key: () => platform,
        path: async () => '/v1/api-keys',
        body: body({ orgId: f(fc.constant(gov.orgId)), role: f(fc.constantFrom('agent', 'ops', 'expert', 'admin')), name: f(text) }),
      },
      {
        name: 'PUT feature flag',
        method: 'put',
        key: () => gov.adminKey,
        path: async () => `/v1/orgs/${gov.orgId}/feature-flags/tool_calling_enabled`,
        body: body({ enabled: f(fc.boolean()), reason: opt(text) }),
      },
      {
        name: 'PUT tool-permissions',
        method: 'put',
        key: () => gov.adminKey,
        path: async () => `/v1/orgs/${gov.orgId}/tool-permissions`,
        body: body({
          items: f(
            fc.uniqueArray(
              fc.tuple(fc.constantFrom(['order_lookup', 'lookup'], ['shopify_query', 'get_product'], ['shopify_order', 'add_note']), fc.constantFrom(null, 'support')).chain(([[toolName, action], specialistId]) =>
                fc.record({ toolName: f(fc.constant(toolName)), action: f(fc.constant(action)), specialistId: f(fc.constant(specialistId)), enabled: f(fc.boolean()) }),
              ),
              { maxLength: 2, selector: (item) => JSON.stringify([item.toolName, item.action, item.specialistId]) },
            ),
          ),
        }),
      },
      {
        name: 'PUT policies',
        method: 'put',
        key: () => gov.adminKey,
        path: async () => `/v1/orgs/${gov.orgId}/policies`,
        body: body({
          rules: f(
            fc.uniqueArray(
              fc.record({
                id: f(fc.constantFrom('r1', 'r2', 'big-refunds')),
                match: opt(
                  fc.record({
                    toolName: opt(fc.constantFrom('order_lookup.lookup', 'shopify_refund.*')),
                    where: opt(
                      fc.array(
                        fc.constantFrom<[string, string, unknown]>(['amount', 'gt', 5], ['orderId', 'in', ['1', '2']], ['orderId', 'exists', true], ['amount', 'eq', '100']).chain(([path, op, value]) =>
                          fc.record({ path: f(fc.constant(path)), op: f(fc.constant(op)), value: f(fc.constant(value)) }),
                        ),
                        { maxLength: 2 },
                      ),
                    ),
                  }),
                ),
                decision: f(fc.constantFrom('allow', 'observe', 'require_expert_approval', 'block')),
                reason: opt(text),
              }),
              { maxLength: 2, selector: (rule) => JSON.stringify(rule.id) },
            ),
          ),
        }),
      },
      {
        name: 'PUT credentials',
        method: 'put',
        key: () => gov.adminKey,
        path: async () => `/v1/orgs/${gov.orgId}/integrations/shopify/credentials`,
        body: body({ config: f(fc.record({ shopDomain: f(fc.constant(shopDomainOf(gov.orgId))), accessToken: f(fc.constant(CREDENTIALS.shopify.accessToken as string)) })) }),
      },
      { name: 'POST /v1/runs', key: () => gov.agentKey, path: async () => '/v1/runs', body: body({ specialistId: f(fc.constant('support')), conversationId: opt(text), metadata: opt(fc.dictionary(text, hostile, { maxKeys: 3 })) }) },
      { name: 'POST complete', key: () => gov.agentKey, path: async () => `/v1/runs/${await freshRun()}/complete`, body: body({ reason: opt(text) }) },
      { name: 'POST cancel', key: () => gov.agentKey, path: async () => `/v1/runs/${await freshRun()}/cancel`, body: body({ reason: opt(text) }) },
      {
        name: 'POST tool-calls:batch',
        key: () => calls.agentKey,
        path: async () => `/v1/runs/${calls.runId}/tool-calls:batch`,
        body: body({ toolUses: f(fc.array(toolUseArb, { minLength: 1, maxLength: 3 })) }),
      },
      {
        name: 'POST reconcile',
        key: () => callsOps,
        path: async () => {
          const [call] = await insertCalls(h.t.ds, [{ orgId: calls.orgId, runId: calls.runId, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' }]);
          return `/v1/tool-calls/${call.id}/reconcile`;
        },
        body: body({ status: f(fc.constantFrom('succeeded', 'failed')), note: f(text) }),
      },
    ];
    // Approvals: each run decides a fresh one, with its own digest (a hostile digest is refused; the right one decides).
    const pending: { id: string; actionDigest: string }[] = [];
    const perRoute = Math.max(40, runs(40).numRuns);
    for (let i = 0; i < perRoute; i++) {
      const res = await postToolUse(h.t.http, calls.runId, calls.agentKey, toolUse('shopify_refund', { action: 'create', orderId: '450789469', amount: '1.00' }));
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      pending.push(await approvalFor(h, expertKey, res.body.toolCallId as string));
    }
    let next = 0;
    const decision = fc.record({ decision: f(fc.constantFrom('approve', 'reject')), reason: opt(text), digestHostile: fc.oneof({ weight: 8, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }) });
    routes.push({
      name: 'POST approval decision',
      key: () => expertKey,
      path: async () => `/v1/approvals/${pending[next].id}/decision`,
      body: decision.chain(({ decision: d, reason, digestHostile }) =>
        (digestHostile ? hostile : fc.constant(pending[next].actionDigest)).map((actionDigest) =>
          JSON.stringify({ decision: d, actionDigest, ...(reason === undefined ? {} : { reason }) }) ?? 'null',
        ),
      ),
    });

    for (const route of routes) {
      const outcomes: Record<number, number> = {};
      const refusals: string[] = []; // a few, for the failure message
      await fc.assert(
        fc.asyncProperty(route.body, async (text) => {
          const path = await route.path();
          const res = await h.t.http[route.method ?? 'post'](path).set(bearer(route.key())).set('Content-Type', 'application/json').send(text);
          if (route.name === 'POST approval decision') next++;
          expectSane(res, `${route.name} ${path} ${text.slice(0, 300)}`);
          expectPrototypeClean();
          outcomes[res.status] = (outcomes[res.status] ?? 0) + 1;
          if (res.status >= 300 && refusals.length < 5) refusals.push(`${text.slice(0, 120)} → ${res.status} ${String(res.body?.detail).slice(0, 160)}`);
        }),
        { ...runs(40), numRuns: perRoute, endOnFailure: true },
      );
      const answered = Object.entries(outcomes);
      const ok = answered.filter(([st]) => Number(st) < 300).reduce((n, [, c]) => n + c, 0);
      const refused = outcomes[400] ?? 0;
      // Well-formed bodies got through to the handler and were served; hostile fields were refused by validation (or named
      // nothing that exists: 404), never by the role check.
      expect(ok, `${route.name} ${JSON.stringify(outcomes)}\n${refusals.join('\n')}`).toBeGreaterThanOrEqual(perRoute / 4);
      expect(refused, `${route.name} ${JSON.stringify(outcomes)}`).toBeGreaterThan(0);
      expect(outcomes[403] ?? 0, `${route.name} ${JSON.stringify(outcomes)}`).toBe(0);
    }
  }, 300_000);
});
