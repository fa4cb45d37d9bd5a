import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A vendor's 429 wait is counted down on a replay from the call's finished_at (remainingWait). That was when the
 * outcome's write landed: one kept through a database outage (answered 503, written in the background) told the
 * agent, on a replay after the vendor's wait had passed, to wait the whole of it again. finished_at is now when the
 * outcome was known.
 */
describe("a vendor's wait on the replay of an outcome written late", () => {
  let h: Harness;
  let outageUntil = 0;
  beforeAll(async () => {
    h = await startHarness();
    const sql = h.t.app.get(Sql) as unknown as { prepared: (text: string, params?: unknown[]) => Promise<unknown[]> };
    const prepared = sql.prepared.bind(sql);
    sql.prepared = async (text: string, params?: unknown[]) => {
      if (performance.now() < outageUntil && text.includes('WITH tc AS (UPDATE tool_calls SET status')) {
        throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
      }
      return prepared(text, params);
    };
  });
  afterAll(async () => {
    h?.emu.clearFaults();
    await h?.close();
  });

  it('counts from the vendor’s answer: past its wait, the replay names none; finished_at is the answer’s time', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    h.emu.fault({ vendor: 'shopify', path: /graphql/, kind: 'status', status: 429, headers: { 'retry-after': '3' }, times: Infinity });
    outageUntil = performance.now() + 3_500; // the outcome's writes refused for 3.5 s from the send
    const sentAt = Date.now();
    const first = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(first.status).toBe(503);
    const id = first.body.toolCallId as string;
    const row = async () =>
      ((await h.t.ds.query('SELECT status, retry_after_seconds, finished_at, updated_at FROM tool_calls WHERE id = $1', [id])) as { status: string; retry_after_seconds: number; finished_at: Date; updated_at: Date }[])[0];
    await waitFor(async () => (await row()).status !== 'running', 'the outcome written once the database is back');
    const written = await row();
    expect(written).toMatchObject({ status: 'failed', retry_after_seconds: 3 });
    expect(written.updated_at.getTime() - written.finished_at.getTime()).toBeGreaterThan(2_000); // known long before it was written
    expect(written.finished_at.getTime() - sentAt).toBeLessThan(2_000);
    await sleep(Math.max(0, sentAt + 3_300 - Date.now()));
    h.emu.clearFaults();
    const replay = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(replay.body).toMatchObject({ errorCode: 'VENDOR_RATE_LIMITED', replayed: true });
    expect(replay.body.retryAfterSeconds ?? null).toBeNull();
    expect(replay.headers['retry-after']).toBeUndefined();
  }, 30_000);
});
