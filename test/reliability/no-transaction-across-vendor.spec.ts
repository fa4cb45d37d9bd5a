import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { sleep, waitFor } from './support.js';

/**
 * ARCHITECTURE.md: no transaction is open across a vendor call (a slow vendor would otherwise hold row locks and
 * a pooled connection for its whole wait). Seen from PostgreSQL's side: pg_stat_activity while a write is held.
 */
const HOLD_MS = 3_000;
const NOTE = 'held-for-the-transaction-check';

interface OpenTransaction {
  pid: number;
  state: string;
  xact_start: Date;
  query: string;
}

describe('no transaction open across a vendor call', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '8000' }); // the hold stays well inside the vendor timeout
  }, 90_000);
  afterAll(async () => {
    await h?.close();
  });

  /** The gateway's backends inside a transaction (its pools name themselves 'tool-gateway'), this query's aside. */
  const openTransactions = async (): Promise<OpenTransaction[]> =>
    (await h.t.ds.query(
      `SELECT pid, state, xact_start, left(query, 200) AS query FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'tool-gateway' AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`,
    )) as OpenTransaction[];

  it('while a Shopify note write is held at the vendor, no gateway backend stays inside a transaction', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: HOLD_MS, bodyMatch: new RegExp(NOTE) });
    const from = h.emu.requests.length;
    const held = () => h.emu.requests.slice(from).find((r) => r.body.includes(NOTE));
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: NOTE });
    const pending = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use).then((r) => r);
    await waitFor(() => held(), 'the write to reach the vendor');

    // Two looks a second apart while the write is held. A statement of background work (a periodic pass) may be
    // caught in one of them; a transaction seen in both, with the same start, stayed open across the vendor call.
    const first = await openTransactions();
    await sleep(1_000);
    const second = await openTransactions();
    expect(held()!.finishedAt, 'the write was still at the vendor at the second look').toBeUndefined();
    const spanning = second.filter((t) => first.some((f) => f.pid === t.pid && new Date(f.xact_start).getTime() === new Date(t.xact_start).getTime()));
    expect(spanning).toEqual([]);

    const res = await pending;
    expect(res.body).toMatchObject({ status: 'succeeded' });
  }, 30_000);
});
