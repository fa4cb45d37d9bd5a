import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { insertCalls, insertRun, ledgerOrder, microsAfterEpoch2026, type SeededCall } from './ledger-seed.js';

interface Page {
  items: { id: string; orgId: string; createdAt: string }[];
  nextCursor: string | null;
}

describe('GET /v1/tool-calls: filters, keyset pages and signed cursors', () => {
  let t: TestApp;
  let orgA: string;
  let orgB: string;
  let opsA: string;
  let opsB: string;
  let platformOps: string;
  let runA1: string;
  let runA2: string;
  let callsA: SeededCall[];
  let callsB: SeededCall[];

  /** Every page of a listing, following nextCursor. */
  async function all(key: string, query: Record<string, string>, limit = 200): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await t.http.get('/v1/tool-calls').query({ ...query, limit: String(limit), ...(cursor ? { cursor } : {}) }).set(bearer(key));
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const page = res.body as Page;
      ids.push(...page.items.map((i) => i.id));
      cursor = page.nextCursor;
    } while (cursor);
    return ids;
  }

  const idsOf = (rows: SeededCall[]): string[] => ledgerOrder(rows).map((r) => r.id);

  beforeAll(async () => {
    t = await startTestApp();
    orgA = await createOrg(t, 'Ledger A');
    orgB = await createOrg(t, 'Ledger B');
    opsA = (await createKey(t, orgA, 'ops')).key;
    opsB = (await createKey(t, orgB, 'ops')).key;
    platformOps = (await createKey(t, null, 'ops')).key;
    runA1 = await insertRun(t.ds, orgA);
    runA2 = await insertRun(t.ds, orgA);
    const runB = await insertRun(t.ds, orgB);
    const tools = [
      ['order_lookup', 'lookup'],
      ['shopify_refund', 'create'],
      ['amazon_query', 'get_order'],
      ['amazon_query', 'get_order_items'],
    ];
    const outcomes: [string, string | null][] = [
      ['succeeded', null],
      ['failed', 'VENDOR_TIMEOUT'],
      ['blocked', 'POLICY_BLOCKED'],
      ['failed', 'VENDOR_ERROR'],
      ['indeterminate', 'OUTCOME_UNKNOWN'],
    ];
    // 60 calls one second apart, except that every third pair shares a created_at (ties break on id)
    // and some differ by a single microsecond (the cursor must keep microseconds).
    callsA = await insertCalls(
      t.ds,
      Array.from({ length: 60 }, (_, i) => {
        const [toolName, action] = tools[i % tools.length];
        const [status, errorCode] = outcomes[i % outcomes.length];
        const micros = i % 3 === 1 ? (i - 1) * 1_000_000 : i % 7 === 0 ? i * 1_000_000 + 1 : i * 1_000_000;
        return {
          orgId: orgA, runId: i % 2 ? runA1 : runA2, toolName, action, status, errorCode,
          correlationId: `corr-${i % 6}`, createdAt: microsAfterEpoch2026(micros),
        };
      }),
    );
    callsB = await insertCalls(
      t.ds,
      Array.from({ length: 10 }, (_, i) => ({ orgId: orgB, runId: runB, correlationId: `corr-${i % 6}`, createdAt: microsAfterEpoch2026(i * 1_000_000 + 500) })),
    );
  });
  afterAll(async () => {
    await t?.close();
  });

  it('lists an org newest first by (createdAt, id), with the ToolCall fields of API.md §6', async () => {
    const res = await t.http.get('/v1/tool-calls').query({ limit: '5' }).set(bearer(opsA));
    expect(res.status).toBe(200);
    expect(Object.keys(res.body as object).sort()).toEqual(['items', 'nextCursor']);
    const first = (res.body as Page).items[0] as unknown as Record<string, unknown>;
    expect(Object.keys(first).sort()).toEqual(
      [
        'id', 'orgId', 'runId', 'specialistId', 'toolName', 'action', 'status', 'errorCode', 'errorText', 'correlationId', 'idempotencyKey',
        'actionDigest', 'inputRedacted', 'outputRedacted', 'riskLevel', 'policyDecisionId', 'retryCount', 'durationMs', 'costCents',
        'createdAt', 'startedAt', 'finishedAt', 'note',
      ].sort(),
    );
    expect(await all(opsA, {})).toEqual(idsOf(callsA));
    expect(await all(opsA, {}, 7)).toEqual(idsOf(callsA));
    expect(await all(opsA, { orgId: orgA }, 13)).toEqual(idsOf(callsA));
  });

  it('applies each filter alone', async () => {
    const cases: [Record<string, string>, (c: SeededCall) => boolean][] = [
      [{ runId: runA1 }, (c) => c.runId === runA1],
      [{ status: 'failed' }, (c) => c.status === 'failed'],
      [{ toolName: 'amazon_query' }, (c) => c.toolName === 'amazon_query'],
      [{ action: 'get_order_items' }, (c) => c.action === 'get_order_items'],
      [{ errorCode: 'VENDOR_TIMEOUT' }, (c) => c.errorCode === 'VENDOR_TIMEOUT'],
      [{ correlationId: 'corr-3' }, (c) => c.correlationId === 'corr-3'],
      [{ since: callsA[20].createdAt }, (c) => c.createdAt >= callsA[20].createdAt],
      [{ until: callsA[20].createdAt }, (c) => c.createdAt < callsA[20].createdAt],
    ];
    for (const [query, keep] of cases) {
      const expected = idsOf(callsA.filter(keep));
      expect(expected.length, JSON.stringify(query)).toBeGreaterThan(0);
      expect(await all(opsA, query, 4), JSON.stringify(query)).toEqual(expected);
    }
  });

  it('combines filters', async () => {
    const cases: [Record<string, string>, (c: SeededCall) => boolean][] = [
      [{ status: 'failed', toolName: 'amazon_query' }, (c) => c.status === 'failed' && c.toolName === 'amazon_query'],
      [{ runId: runA2, errorCode: 'VENDOR_ERROR' }, (c) => c.runId === runA2 && c.errorCode === 'VENDOR_ERROR'],
      [
        { toolName: 'amazon_query', action: 'get_order', since: callsA[10].createdAt, until: callsA[50].createdAt },
        (c) => c.action === 'get_order' && c.createdAt >= callsA[10].createdAt && c.createdAt < callsA[50].createdAt,
      ],
      [
        { status: 'indeterminate', correlationId: 'corr-4', runId: runA2 },
        (c) => c.status === 'indeterminate' && c.correlationId === 'corr-4' && c.runId === runA2,
      ],
    ];
    for (const [query, keep] of cases) {
      const expected = idsOf(callsA.filter(keep));
      expect(expected.length, JSON.stringify(query)).toBeGreaterThan(0);
      expect(await all(opsA, query, 2), JSON.stringify(query)).toEqual(expected);
    }
    expect(await all(opsA, { status: 'succeeded', errorCode: 'VENDOR_TIMEOUT' })).toEqual([]);
  });

  it('scopes by org: org keys see their org only, platform keys all orgs or the one they name', async () => {
    expect(await all(opsB, {})).toEqual(idsOf(callsB));
    expect(await all(opsB, { correlationId: 'corr-3' })).toEqual(idsOf(callsB.filter((c) => c.correlationId === 'corr-3')));
    const other = await t.http.get('/v1/tool-calls').query({ orgId: orgA }).set(bearer(opsB));
    expect(other.status).toBe(404);
    expect(other.body.code).toBe('NOT_FOUND');
    expect((await t.http.get('/v1/tool-calls').query({ orgId: randomUUID() }).set(adminAuth)).status).toBe(404);
    expect(await all(platformOps, { orgId: orgB })).toEqual(idsOf(callsB));
    const everything = await all(platformOps, { correlationId: 'corr-3' });
    expect(everything).toEqual(idsOf([...callsA, ...callsB].filter((c) => c.correlationId === 'corr-3')));
  });

  it('pages 250 rows exactly once, in order, while newer rows keep arriving', async () => {
    const org = await createOrg(t, 'Pager');
    const ops = (await createKey(t, org, 'ops')).key;
    const run = await insertRun(t.ds, org);
    // In the past, with runs of five rows sharing one created_at and neighbours one microsecond apart.
    const seeded = await insertCalls(
      t.ds,
      Array.from({ length: 250 }, (_, i) => ({ orgId: org, runId: run, createdAt: microsAfterEpoch2026(Math.floor(i / 5) * 3 + (i % 5 === 4 ? 1 : 0)) })),
    );
    const first = await t.http.get('/v1/tool-calls').query({ limit: '23' }).set(bearer(ops));
    const seen = (first.body as Page).items.map((i) => i.id);
    // From here on rows keep arriving; they are newer than the cursor, so no later page may show them.
    let stop = false;
    const arrivals: string[] = [];
    const writer = (async () => {
      while (!stop) {
        const rows = await insertCalls(t.ds, [{ orgId: org, runId: run }, { orgId: org, runId: run }]);
        arrivals.push(...rows.map((r) => r.id));
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    let cursor = (first.body as Page).nextCursor;
    let pages = 1;
    while (cursor) {
      const res = await t.http.get('/v1/tool-calls').query({ limit: '23', cursor }).set(bearer(ops));
      expect(res.status).toBe(200);
      seen.push(...(res.body as Page).items.map((i) => i.id));
      cursor = (res.body as Page).nextCursor;
      pages++;
      await new Promise((r) => setTimeout(r, 5));
    }
    stop = true;
    await writer;
    expect(arrivals.length).toBeGreaterThan(10);
    expect(seen).toEqual(idsOf(seeded));
    expect(new Set(seen).size).toBe(250);
    expect(seen.some((id) => arrivals.includes(id))).toBe(false);
    // The arrivals are there for whoever starts again from the first page.
    expect((await all(ops, {})).slice(0, arrivals.length).sort()).toEqual([...arrivals].sort());
    expect(pages).toBeGreaterThan(10);
  });

  it('refuses a tampered, foreign or re-filtered cursor with 400', async () => {
    const res = await t.http.get('/v1/tool-calls').query({ limit: '5', status: 'failed' }).set(bearer(opsA));
    const cursor = (res.body as Page).nextCursor!;
    expect(cursor).toEqual(expect.any(String));
    const ok = await t.http.get('/v1/tool-calls').query({ limit: '5', status: 'failed', cursor }).set(bearer(opsA));
    expect(ok.status).toBe(200);

    const [body, sig] = cursor.split('.');
    const payload = JSON.parse(Buffer.from(body, 'base64url').toString()) as Record<string, string>;
    const forged = `${Buffer.from(JSON.stringify({ ...payload, o: orgB })).toString('base64url')}.${sig}`;
    const flipped = `${body}.${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`;
    const bad: [string, Record<string, string>, string][] = [
      ['forged org', { status: 'failed', cursor: forged }, opsA],
      ['bad signature', { status: 'failed', cursor: flipped }, opsA],
      ['garbage', { status: 'failed', cursor: 'not-a-cursor' }, opsA],
      ['truncated', { status: 'failed', cursor: cursor.slice(0, -5) }, opsA],
      ['other filter', { status: 'blocked', cursor }, opsA],
      ['no filter', { cursor }, opsA],
      ['other org', { status: 'failed', cursor }, opsB],
      ['platform, all orgs', { status: 'failed', cursor }, platformOps],
    ];
    for (const [what, query, key] of bad) {
      const r = await t.http.get('/v1/tool-calls').query({ limit: '5', ...query }).set(bearer(key));
      expect(r.status, what).toBe(400);
      expect(r.body.code, what).toBe('VALIDATION_FAILED');
    }
    const events = await t.http.get('/v1/ledger/events').query({ cursor }).set(bearer(opsA));
    expect(events.status).toBe(400);
  });

  it('a window whose start is after its end is 400 on every listing (not an empty answer); equal bounds are an empty window', async () => {
    const swapped: [string, Record<string, string>][] = [
      ['/v1/tool-calls', { since: '2026-02-01', until: '2026-01-01' }],
      ['/v1/tool-calls/export', { format: 'ndjson', since: '2026-01-01T00:00:00.000002Z', until: '2026-01-01T00:00:00.000001Z' }],
      ['/v1/ledger/events', { since: '2026-01-01T01:00:00+01:00', until: '2025-12-31T23:59:59Z' }],
      [`/v1/orgs/${orgA}/usage`, { from: '2026-03-01', to: '2026-02-28T23:59:59.999999Z' }],
    ];
    for (const [path, query] of swapped) {
      const r = await t.http.get(path).query(query).set(bearer(opsA));
      expect(r.status, path).toBe(400);
      expect(r.body.code, path).toBe('VALIDATION_FAILED');
      expect(r.body.detail, path).toMatch(/must not be after/);
    }
    // The same instant in two zones is an empty window, not a swapped one; so is 00:00+01:00 before 00:00Z.
    const equal = await t.http.get('/v1/tool-calls').query({ since: '2026-01-01T01:00:00+01:00', until: '2026-01-01T00:00:00Z' }).set(bearer(opsA));
    expect(equal.status).toBe(200);
    expect((equal.body as Page).items).toEqual([]);
    const zoned = await t.http.get('/v1/ledger/events').query({ since: '2026-01-01T00:00:00+01:00', until: '2026-01-01T00:00:00Z' }).set(bearer(opsA));
    expect(zoned.status).toBe(200);
    const usage = await t.http.get(`/v1/orgs/${orgA}/usage`).query({ from: '2026-01-01', to: '2026-01-01' }).set(bearer(opsA));
    expect(usage.status).toBe(200);
  });

  it('takes RFC 3339 nanoseconds (Go, Java send 9 digits): a finer instant selects exactly what it would at full precision', async () => {
    const org = await createOrg(t, 'Nanoseconds');
    const ops = (await createKey(t, org, 'ops')).key;
    const run = await insertRun(t.ds, org);
    const [c1, c2, c3] = await insertCalls(t.ds, [1, 2, 3].map((us) => ({ orgId: org, runId: run, createdAt: microsAfterEpoch2026(us) })));
    const ids = async (query: Record<string, string>): Promise<string[]> => {
      const r = await t.http.get('/v1/tool-calls').query(query).set(bearer(ops));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return (r.body as Page).items.map((i) => i.id).sort();
    };
    // since .000001001: .000001 is before it, .000002 after; until .000002001 (exclusive): .000002 is before it.
    expect(await ids({ since: '2026-01-01T00:00:00.000001001Z' })).toEqual([c2.id, c3.id].sort());
    expect(await ids({ until: '2026-01-01T00:00:00.000002001Z' })).toEqual([c1.id, c2.id].sort());
    expect(await ids({ since: '2026-01-01T01:00:00.000002000+01:00' })).toEqual([c2.id, c3.id].sort());
    const events = await t.http.get('/v1/ledger/events').query({ until: '2026-01-31T12:00:00.123456789Z' }).set(bearer(ops));
    const usage = await t.http.get(`/v1/orgs/${org}/usage`).query({ from: '2026-01-31T12:00:00.123456789Z' }).set(bearer(ops));
    expect([events.status, usage.status]).toEqual([200, 200]);
  });

  it('validates limit and every filter (400, never 500); SQL-looking values are only values', async () => {
    for (const limit of ['0', '201', '-1', 'abc', '1.5', '', '1e2']) {
      const r = await t.http.get('/v1/tool-calls').query({ limit }).set(bearer(opsA));
      expect(r.status, `limit=${limit}`).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
    }
    expect((await t.http.get('/v1/tool-calls').query({ limit: '200' }).set(bearer(opsA))).status).toBe(200);
    expect(((await t.http.get('/v1/tool-calls').query({ limit: '1' }).set(bearer(opsA))).body as Page).items).toHaveLength(1);
    const bad: Record<string, string>[] = [
      { runId: 'not-a-uuid' },
      { orgId: "1' OR '1'='1" },
      { status: 'exploded' },
      { since: 'yesterday' },
      { until: '2026-02-30T00:00:00Z' },
      { since: '2026-01-01T25:00:00Z' },
      { toolName: '' },
      { unknownFilter: 'x' },
      // never an echoed X-Correlation-Id, so never a match: said, not searched
      { correlationId: 'has blanks' },
      { correlationId: 'x'.repeat(256) },
      { correlationId: 'café' },
    ];
    for (const query of bad) {
      const r = await t.http.get('/v1/tool-calls').query(query).set(bearer(opsA));
      expect(r.status, JSON.stringify(query)).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
    }
    // Each message names its field once.
    const blanks = await t.http.get('/v1/tool-calls').query({ correlationId: 'has blanks' }).set(bearer(opsA));
    expect(blanks.body.errors).toEqual(['correlationId: correlationId must be 1-255 printable ASCII characters without blanks, as X-Correlation-Id']);
    const repeated = await t.http.get(`/v1/tool-calls?status=failed&status=blocked`).set(bearer(opsA));
    expect(repeated.status).toBe(400);
    for (const value of ["' OR 1=1 --", "x'); DROP TABLE tool_calls; --", '%', '\\']) {
      const r = await t.http.get('/v1/tool-calls').query({ toolName: value, correlationId: value.replaceAll(' ', '') }).set(bearer(opsA));
      expect(r.status).toBe(200);
      expect((r.body as Page).items).toEqual([]);
    }
    expect(await all(opsA, {})).toHaveLength(callsA.length);
    // Dates alone and zone offsets are accepted.
    expect((await t.http.get('/v1/tool-calls').query({ since: '2026-01-01', until: '2026-01-01T01:00:00+01:00' }).set(bearer(opsA))).status).toBe(200);
  });

  it('answers 401 without a key and 403 to agent and expert keys on every ops route', async () => {
    const paths = [
      '/v1/tool-calls', `/v1/tool-calls/${callsA[0].id}`, '/v1/tool-calls/export?format=csv', '/v1/ledger/events', '/v1/ledger/verify',
      `/v1/orgs/${orgA}/usage`,
    ];
    for (const path of paths) {
      const none = await t.http.get(path);
      expect(none.status, `${path} without key`).toBe(401);
      expect(none.body.code).toBe('UNAUTHENTICATED');
    }
    for (const role of ['agent', 'expert']) {
      const key = (await createKey(t, orgA, role)).key;
      for (const path of paths) {
        const r = await t.http.get(path).set(bearer(key));
        expect(r.status, `${role} ${path}`).toBe(403);
        expect(r.body.code).toBe('FORBIDDEN');
      }
    }
  });

  it('shows one call with its events in order, its policy decision and its approval', async () => {
    const run = runA1;
    const decisionId = randomUUID();
    const [call] = await insertCalls(t.ds, [
      { orgId: orgA, runId: run, toolName: 'shopify_refund', action: 'create', status: 'waiting_approval', policyDecisionId: decisionId },
    ]);
    await t.ds.query(
      `INSERT INTO policy_decisions (id, org_id, tool_call_id, decision, risk_level, rule_id, reason, action_digest)
       VALUES ($1, $2, $3, 'require_expert_approval', 'high', 'big-refunds', 'refunds over 100 need an expert', $4)`,
      [decisionId, orgA, call.id, 'ab'.repeat(32)],
    );
    const approvalId = randomUUID();
    await t.ds.query(
      `INSERT INTO approval_requests (id, org_id, tool_call_id, run_id, kind, status, tool_name, action, input_redacted, risk_level, reason,
                                      action_digest, expires_at)
       VALUES ($1, $2, $3, $4, 'expert', 'pending', 'shopify_refund', 'create', '{"orderId":"1","amount":"150.00"}', 'high', 'refunds over 100', $5,
               now() + interval '1 day')`,
      [approvalId, orgA, call.id, run, 'ab'.repeat(32)],
    );
    const events = t.app.get(LedgerEventsService);
    for (const type of ['tool_call.requested', 'tool_call.policy_decided', 'approval.requested']) {
      await events.append([{ orgId: orgA, type, runId: run, toolCallId: call.id, actor: { keyId: null, role: 'agent' }, metadata: { step: type } }]);
    }
    // Another org's event naming the same call id must not leak into the story.
    await events.append([{ orgId: orgB, type: 'tool_call.requested', toolCallId: call.id }]);

    const res = await t.http.get(`/v1/tool-calls/${call.id}`).set(bearer(opsA));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: call.id, orgId: orgA, status: 'waiting_approval', policyDecisionId: decisionId });
    expect((res.body.events as { type: string }[]).map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.policy_decided', 'approval.requested']);
    expect(Object.keys(res.body.events[0] as object).sort()).toEqual(['actor', 'chainSeq', 'createdAt', 'hash', 'id', 'metadata', 'type']);
    expect(res.body.events[0]).toMatchObject({ actor: { keyId: null, role: 'agent' }, metadata: { step: 'tool_call.requested' } });
    expect(res.body.policyDecision).toMatchObject({ id: decisionId, decision: 'require_expert_approval', riskLevel: 'high', ruleId: 'big-refunds' });
    expect(res.body.approval).toMatchObject({ id: approvalId, kind: 'expert', status: 'pending', toolCallId: call.id, inputRedacted: { orderId: '1', amount: '150.00' } });

    const plain = await t.http.get(`/v1/tool-calls/${callsA[0].id}`).set(adminAuth);
    expect(plain.status).toBe(200);
    expect(plain.body).toMatchObject({ id: callsA[0].id, events: [], policyDecision: null, approval: null });
  });

  it('answers 404 for another org’s call, a missing call and a malformed id', async () => {
    const theirs = await t.http.get(`/v1/tool-calls/${callsA[0].id}`).set(bearer(opsB));
    const missing = await t.http.get(`/v1/tool-calls/${randomUUID()}`).set(bearer(opsB));
    const malformed = await t.http.get(`/v1/tool-calls/not-an-id'`).set(bearer(opsB));
    for (const r of [theirs, missing, malformed]) {
      expect(r.status).toBe(404);
      expect(r.body.code).toBe('NOT_FOUND');
    }
    const strip = (b: Record<string, unknown>) => ({ ...b, correlationId: undefined });
    expect(strip(theirs.body)).toEqual(strip(missing.body));
  });
});
