import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
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
    expect(other.body.detail).toBe('this Idempotency-Key or this tool_use id (in this run) was already used for a different action');
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
});
