import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_CANONICAL_DEPTH } from '../../src/common/canonical-json.js';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { TOO_DEEP_ACTOR, TOO_DEEP_METADATA } from '../../src/ops/ledger-events.sql.js';
import { setupOrg, toolUse } from '../support/scenario.js';
import { PastTheTrigger } from '../support/past-the-trigger.js';
import { adminAuth, bearer, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * jsonb takes arrays and objects nested thousands of levels deep; the gateway never writes one (request bodies stop at
 * 32 levels), but a plain INSERT with the gateway's own role can. canonicalJson refuses anything deeper than
 * MAX_CANONICAL_DEPTH as having no canonical form, so such an event is one the sealer cannot hash: it stops its own
 * org's chain, every other org is still sealed, verify answers 200 naming it, and the listing shows it with its
 * metadata (or actor) replaced by a marker. (It recursed a level at a time and ran out of stack: a RangeError that
 * failed every sealing pass of every org, and made the org's verify and its event listing 500s.)
 */
describe('ledger events nested deeper than the canonical form allows', () => {
  let t: TestApp;
  /** A superuser connection, as an attacker (or a careless tool) with database access would have. */
  let su: PastTheTrigger;
  const written: string[] = [];
  const nested = (levels: number): string => '['.repeat(levels) + ']'.repeat(levels);
  const DEEP = nested(5_000);

  const asSuperuser = (sql: string, params: unknown[]) => su.query(sql, params);

  /** An event INSERTed with the gateway's own role, as any write around it could: metadata {"x": <json>}. */
  async function insertAround(orgId: string, json: string, column: 'metadata' | 'actor' = 'metadata'): Promise<string> {
    const [{ id }] = (await t.ds.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, ${column}) VALUES (gen_random_uuid(), $1, 'test.injected', jsonb_build_object('x', $2::jsonb)) RETURNING id`,
      [orgId, json],
    )) as { id: string }[];
    written.push(id);
    return id;
  }

  const append = (orgId: string, type: string, n = 1) =>
    t.app.get(LedgerEventsService).append(Array.from({ length: n }, (_, i) => ({ orgId, type, metadata: { i } })));
  const sealNow = () => t.app.get(LedgerSealerService).sealNow();
  const verify = async (orgId: string) => {
    const res = await t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth);
    return { status: res.status, body: res.body as Record<string, unknown> };
  };
  const unsealed = async (orgId: string) =>
    ((await t.ds.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE org_id = $1 AND hash IS NULL`, [orgId])) as { n: number }[])[0].n;

  beforeAll(async () => {
    t = await startTestApp({ LEDGER_SEAL_INTERVAL_MS: '60000' });
    su = await PastTheTrigger.connect();
  });
  afterAll(async () => {
    // The database is shared with the rest of the run: leave no event that stops a chain.
    await asSuperuser(`DELETE FROM runtime_ledger_events WHERE id = ANY($1::uuid[])`, [written]).catch(() => undefined);
    await su?.end();
    await t?.close();
  });

  it('an unsealed one stops only its own org’s chain; the other org is sealed; its verify is a 200 break naming it; removed, the chain goes on', async () => {
    const victim = await createOrg(t, 'Nested victim');
    const org = await createOrg(t, 'Nested injected');
    await sealNow();
    const deep = await insertAround(org, DEEP);
    await append(org, 'test.after');
    await append(victim, 'test.after');

    expect(await sealNow()).toBe(1); // the victim's event; the org's waits behind the deep one
    expect(await unsealed(victim)).toBe(0);
    expect(await unsealed(org)).toBe(2);
    expect(await verify(victim)).toMatchObject({ status: 200, body: { ok: true, checked: 2 } });
    expect(await verify(org)).toEqual({
      status: 200,
      body: { ok: false, checked: 1, brokenAt: { chainSeq: 0, eventId: deep, reason: expect.stringMatching(/^unsealed event cannot be hashed/) } },
    });
    // The sealer's line once (ids only), however many passes meet it.
    expect(t.logs.filter((l) => l.includes(deep) && l.includes('stopped at event')).length).toBe(1);

    await asSuperuser(`DELETE FROM runtime_ledger_events WHERE id = $1`, [deep]);
    await sealNow(); // a full scan that no longer meets it lifts the stop
    await sealNow();
    expect(await unsealed(org)).toBe(0);
    expect(await verify(org)).toMatchObject({ status: 200, body: { ok: true, checked: 2 } });
  }, 60_000);

  it('a sealed one rewritten to such nesting is a break at its position, not a 500', async () => {
    const org = await createOrg(t, 'Nested sealed');
    await append(org, 'test.step', 2);
    await sealNow();
    const [{ id }] = (
      await asSuperuser(`UPDATE runtime_ledger_events SET metadata = jsonb_build_object('x', $2::jsonb) WHERE org_id = $1 AND chain_seq = 2 RETURNING id`, [org, DEEP])
    ).rows as { id: string }[];
    written.push(id);
    expect(await verify(org)).toEqual({
      status: 200,
      body: { ok: false, checked: 1, brokenAt: { chainSeq: 2, eventId: id, reason: expect.stringMatching(/cannot be hashed/) } },
    });
  });

  it('the org’s listing is a 200: the deep metadata or actor replaced by a marker, every other event as it is', async () => {
    const org = await createOrg(t, 'Nested listing');
    await append(org, 'test.before');
    const deepMetadata = await insertAround(org, DEEP);
    const deepActor = await insertAround(org, DEEP, 'actor');
    // Just within what is shown: the listing cuts at the canonical limit, not at what JSON.stringify survives.
    const shallow = await insertAround(org, nested(MAX_CANONICAL_DEPTH - 1));
    const res = await t.http.get('/v1/ledger/events').query({ orgId: org }).set(adminAuth);
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(200);
    const items = (res.body as { items: { id: string; type: string; actor: unknown; metadata: unknown }[] }).items;
    const byId = new Map(items.map((e) => [e.id, e]));
    expect(byId.get(deepMetadata)).toMatchObject({ type: 'test.injected', metadata: TOO_DEEP_METADATA });
    expect(byId.get(deepActor)).toMatchObject({ type: 'test.injected', actor: TOO_DEEP_ACTOR, metadata: {} });
    expect(TOO_DEEP_METADATA).toEqual({ nestedTooDeep: true, maxDepth: MAX_CANONICAL_DEPTH });
    expect(JSON.stringify((byId.get(shallow)!.metadata as { x: unknown }).x)).toBe(nested(MAX_CANONICAL_DEPTH - 1));
    expect(items.map((e) => e.type)).toEqual(expect.arrayContaining(['org.created', 'test.before']));
  });

  it('a call’s story (GET /v1/tool-calls/:id) is a 200 with the marker for such an event of the call', async () => {
    const org = await setupOrg(t, { tools: ['order_lookup.lookup'] });
    // Not in the run's manifest: recorded blocked, with its events, no vendor needed.
    const res = await t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '1', amount: '1.00' }));
    const callId = (res.body as { toolCallId: string }).toolCallId;
    expect(callId).toEqual(expect.any(String));
    const [{ id }] = (await t.ds.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, tool_call_id, run_id, metadata) VALUES (gen_random_uuid(), $1, 'test.injected', $2, $3, jsonb_build_object('x', $4::jsonb)) RETURNING id`,
      [org.orgId, callId, org.runId, DEEP],
    )) as { id: string }[];
    written.push(id);
    const story = await t.http.get(`/v1/tool-calls/${callId}`).set(adminAuth);
    expect(story.status, JSON.stringify(story.body).slice(0, 300)).toBe(200);
    const events = (story.body as { events: { id: string; metadata: unknown }[] }).events;
    expect(events.find((e) => e.id === id)).toMatchObject({ metadata: TOO_DEEP_METADATA });
    expect(events.filter((e) => e.id !== id).length).toBeGreaterThan(0);
  });

  it('a policies row whose rules were rewritten to such nesting: verify is a 200 break on the policy, not a 500', async () => {
    const org = await createOrg(t, 'Nested policy');
    const put = await t.http
      .put(`/v1/orgs/${org}/policies`)
      .set(adminAuth)
      .send({ rules: [{ id: 'r', match: { toolName: 'order_lookup.lookup' }, decision: 'block', reason: 'x' }] });
    expect(put.status, JSON.stringify(put.body)).toBeLessThan(300);
    await t.ds.query(`UPDATE policies SET rules = jsonb_build_array($2::jsonb) WHERE org_id = $1`, [org, DEEP]);
    const res = await verify(org);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ ok: false, brokenAt: { reason: expect.stringMatching(/policy rules/) } });
  });
});
