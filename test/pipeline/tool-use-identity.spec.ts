import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { VendorAdmission } from '../../src/tool-calls/vendor-admission.js';
import { aroundStatements, connectionLost } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

let n = 0;
const newId = (): string => `toolu_01Q${String(++n).padStart(4, '0')}${Date.now().toString(36)}`;

/**
 * A tool_use id names one call in its run, whatever Idempotency-Key comes with it (tool_calls_run_tool_use_uq), and a
 * key names one call in its org whatever tool_use id comes with it. Before, the key alone decided: the same tool_use
 * sent again under another key, or without the one it first had, ran a second time at the vendor.
 */
describe('the tool_use id names the call in its run, whatever key comes with it', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const post = (org: OrgSetup, body: unknown, headers: Record<string, string> = {}) =>
    h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).set(headers).send(body as object);
  // Allowed without an approval (writes need one by default): the call runs as it is posted.
  const nangoOrg = () => setupOrg(h.t, { tools: ['nango_proxy.post'], vendors: ['nango'], rules: [{ id: 'allow', match: {}, decision: 'allow' }] });
  /** A Nango POST (a write the gateway never resends) carrying `marker`, and how many reached the provider. */
  const write = (marker: string, id = newId()) => toolUse('nango_proxy', { action: 'post', path: '/v1/tickets', body: { marker } }, id);
  const sent = (marker: string) => h.emu.requests.filter((r) => r.body.includes(marker)).length;

  it.each([
    ['under another key', { 'Idempotency-Key': 'conversation-7:b' }],
    ['without the key it was first sent with', {}],
  ])('sent first under a key, then %s: replayed, the write sent once', async (_, second) => {
    const org = await nangoOrg();
    const marker = `m-${newId()}`;
    const use = write(marker);
    const first = await post(org, use, { 'Idempotency-Key': 'conversation-7:a' });
    expect(first.body).toMatchObject({ status: 'succeeded', replayed: false });
    const again = await post(org, use, second);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ toolCallId: first.body.toolCallId, status: 'succeeded', replayed: true });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(sent(marker)).toBe(1);
  });

  it('sent first without a key, then under one: replayed; the same id with other input under a new key is 422, nothing sent', async () => {
    const org = await nangoOrg();
    const marker = `m-${newId()}`;
    const use = write(marker);
    const first = await post(org, use);
    expect(first.body.status).toBe('succeeded');
    const again = await post(org, use, { 'Idempotency-Key': 'fresh-key-1' });
    expect(again.body).toMatchObject({ toolCallId: first.body.toolCallId, replayed: true });
    const other = await post(org, { ...write(`${marker}-other`), id: use.id }, { 'Idempotency-Key': 'fresh-key-2' });
    expect([other.status, other.body.code]).toEqual([422, 'IDEMPOTENCY_KEY_REUSED']);
    expect(other.body.detail).toBe('this tool_use id was already used in this run for a different action: a tool_use id names one call of its run (a new call needs its own id)');
    expect(sent(marker)).toBe(1);
    expect(sent(`${marker}-other`)).toBe(0);
  });

  it('ten sends of one tool_use at once, each under its own key: one call, one write at the vendor', async () => {
    const org = await nangoOrg();
    const marker = `m-${newId()}`;
    const use = write(marker);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => post(org, use, { 'Idempotency-Key': `racer-${i}` }).then((r) => r)));
    const ids = new Set(answers.filter((r) => r.status === 200).map((r) => r.body.toolCallId as string));
    expect(ids.size).toBe(1);
    // The others were replays, or 409 while the one call ran.
    for (const r of answers) expect([200, 409], JSON.stringify(r.body)).toContain(r.status);
    expect(answers.filter((r) => r.status === 200 && r.body.replayed === false)).toHaveLength(1);
    expect(sent(marker)).toBe(1);
    const [{ count }] = (await h.t.ds.query(`SELECT count(*)::int AS count FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2`, [org.runId, use.id])) as [{ count: number }];
    expect(count).toBe(1);
  });

  it('after a 503 with toolCallId, the same id sent again without its key (as the answer says) reads that call: the write sent once', async () => {
    const org = await nangoOrg();
    const marker = `m-${newId()}`;
    const use = write(marker);
    let down = true;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (down && text.includes('tc AS (UPDATE tool_calls SET status = $2')) throw connectionLost(); // the outcome write
      return send();
    });
    let first;
    try {
      first = await post(org, use, { 'Idempotency-Key': 'conversation-9:a' });
    } finally {
      down = false;
      undo();
    }
    expect(first.status).toBe(503);
    expect(first.body).toMatchObject({ outcomeConfirmed: false, toolCallId: expect.any(String) });
    const again = await waitFor(async () => {
      const r = await post(org, use);
      return r.status === 200 ? r : undefined; // 409 until the gateway has written the outcome it kept
    }, 'the kept outcome to be written', 20_000, 250);
    expect(again.body).toMatchObject({ toolCallId: first.body.toolCallId, status: 'succeeded', replayed: true });
    expect(sent(marker)).toBe(1);
  });

  it('a batch sent again after its block was posted alone under a key: replayed, not run again', async () => {
    const org = await nangoOrg();
    const marker = `m-${newId()}`;
    const use = write(marker);
    expect((await post(org, use, { 'Idempotency-Key': 'single-then-batch' })).body.status).toBe('succeeded');
    const batch = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({ toolUses: [use] });
    expect(batch.status).toBe(200);
    expect(batch.body.results[0]).toMatchObject({ status: 'succeeded', replayed: true });
    expect(sent(marker)).toBe(1);
  });

  it('a key naming one call sent with a tool_use id naming another: the tool_use id\'s call is answered, never the key\'s', async () => {
    const org = await nangoOrg();
    const marker = `m-${newId()}`;
    // Call A (key c7:a) refused by the vendor; call B, the same write as another tool_use under c7:b, succeeded.
    h.emu.fault({ vendor: 'nango', kind: 'status', status: 400, times: 1 });
    const a = await post(org, write(marker), { 'Idempotency-Key': 'c7:a' });
    h.emu.clearFaults();
    expect(a.body.status).toBe('failed');
    const useB = write(marker);
    const b = await post(org, useB, { 'Idempotency-Key': 'c7:b' });
    expect(b.body).toMatchObject({ status: 'succeeded', replayed: false });
    // A runtime that lost track of its keys sends B's tool_use under A's key: told "failed", the model would write again.
    const again = await post(org, useB, { 'Idempotency-Key': 'c7:a' });
    expect(again.body).toMatchObject({ toolCallId: b.body.toolCallId, status: 'succeeded', replayed: true });
    expect(sent(marker)).toBe(2);
  });

  it('a tool_use recorded twice under two keys before it was unique per run: each key still gets its own call, the id alone the first', async () => {
    const org = await nangoOrg();
    const marker = `m-${newId()}`;
    const use = write(marker);
    const first = await post(org, use, { 'Idempotency-Key': 'before-a' });
    expect(first.body.status).toBe('succeeded');
    // As an earlier release let it happen: the same tool_use run again under another key (that one failed), and the
    // upgrade's migration marked the later one tool_use_unique = false.
    const [{ id: second }] = (await h.t.ds.query(
      `INSERT INTO tool_calls SELECT (jsonb_populate_record(NULL::tool_calls, to_jsonb(t) || jsonb_build_object(
           'id', gen_random_uuid(), 'idempotency_key', 'key:before-b', 'tool_use_unique', false, 'status', 'failed', 'error_code', 'VENDOR_ERROR',
           'vendor_status', 502, 'vendor_refused', false, 'created_at', now()))).*
         FROM tool_calls t WHERE t.id = $1 RETURNING id`,
      [first.body.toolCallId],
    )) as { id: string }[];
    const underB = await post(org, use, { 'Idempotency-Key': 'before-b' });
    expect(underB.body).toMatchObject({ toolCallId: second, status: 'failed', errorCode: 'VENDOR_ERROR', replayed: true });
    expect((await post(org, use, { 'Idempotency-Key': 'before-a' })).body).toMatchObject({ toolCallId: first.body.toolCallId, status: 'succeeded', replayed: true });
    expect((await post(org, use)).body).toMatchObject({ toolCallId: first.body.toolCallId, status: 'succeeded', replayed: true });
    expect(sent(marker)).toBe(1);
  });

  it('the same tool_use id in another run is another call (the id is unique per run, as its default key is)', async () => {
    const a = await nangoOrg();
    const marker = `m-${newId()}`;
    const use = write(marker);
    expect((await post(a, use)).body.status).toBe('succeeded');
    const run = await h.t.http.post('/v1/runs').set(bearer(a.agentKey)).send({ specialistId: 'support' });
    expect(run.status).toBe(201);
    const other = await h.t.http.post(`/v1/runs/${run.body.id}/tool-calls`).set(bearer(a.agentKey)).send(use);
    expect(other.body).toMatchObject({ status: 'succeeded', replayed: false });
    expect(sent(marker)).toBe(2);
  });

  it('an explicit key first used in another run is 422 naming that call: never its result, nothing run or recorded', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    // Run B's manifest (another specialist's) does not hold the tool at all.
    const perms = await h.t.http
      .put(`/v1/orgs/${org.orgId}/tool-permissions`)
      .set(bearer(org.adminKey))
      .send({ items: [{ toolName: 'order_lookup', action: 'lookup', specialistId: 'support', enabled: true }] });
    expect(perms.status).toBe(200);
    const runB = await h.t.http.post('/v1/runs').set(bearer(org.agentKey)).send({ specialistId: 'billing' });
    expect(runB.body.manifest.allowedTools).not.toContain('order_lookup.lookup');
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const key = { 'Idempotency-Key': `lookup-${newId()}` };
    const inA = await post(org, use, key);
    expect(inA.body.status).toBe('succeeded');
    const inB = await h.t.http.post(`/v1/runs/${runB.body.id}/tool-calls`).set(bearer(org.agentKey)).set(key).send(use);
    expect(inB.status, JSON.stringify(inB.body)).toBe(422);
    expect(inB.body).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', toolCallId: inA.body.toolCallId });
    expect(inB.body.result).toBeUndefined();
    expect(JSON.stringify(inB.body)).not.toContain('12345');
    expect((await h.t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1', [runB.body.id]))[0].n).toBe(0);
    // In its own run the key still replays its call.
    expect((await post(org, use, key)).body).toMatchObject({ toolCallId: inA.body.toolCallId, status: 'succeeded', replayed: true });
  });
});

describe('the same tool_use under another key while its twin holds the only vendor slot', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_CONCURRENCY_LIMIT: '1' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('waits for the twin\'s intent and is answered as its replay (409 while it runs), not refused 429', async () => {
    const org = await setupOrg(h.t, { tools: ['nango_proxy.post'], vendors: ['nango'], rules: [{ id: 'allow', match: {}, decision: 'allow' }] });
    const marker = `twin-${newId()}`;
    const use = toolUse('nango_proxy', { action: 'post', path: '/v1/tickets', body: { marker } }, newId());
    const post = (key: string) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).set({ 'Idempotency-Key': key }).send(use);
    // The first request's intent is held at the database, its vendor slot taken, until the twin is refused the slot.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let held!: () => void;
    const holding = new Promise<void>((r) => (held = r));
    const undo = aroundStatements(h.t.app.get(Sql), async (text, params, send) => {
      if (text.includes('tc AS (INSERT INTO tool_calls') && params.includes(use.id)) {
        held();
        await gate;
      }
      return send();
    });
    const admission = h.t.app.get(VendorAdmission);
    const limited = vi.spyOn(admission, 'concurrencyLimited').mockImplementation(function (this: VendorAdmission, ...args) {
      release(); // the twin found the slot taken: let the first intent commit
      return VendorAdmission.prototype.concurrencyLimited.apply(this, args);
    });
    try {
      const first = post('conv-1:a').then((r) => r);
      await holding;
      const twin = await post('conv-1:b');
      expect(limited).toHaveBeenCalledTimes(1);
      expect((await first).body.status).toBe('succeeded');
      expect([200, 409], JSON.stringify(twin.body)).toContain(twin.status);
      if (twin.status === 200) expect(twin.body).toMatchObject({ toolCallId: (await first).body.toolCallId, replayed: true });
      expect(h.emu.requests.filter((r) => r.body.includes(marker))).toHaveLength(1);
    } finally {
      release();
      limited.mockRestore();
      undo();
    }
  });
});
