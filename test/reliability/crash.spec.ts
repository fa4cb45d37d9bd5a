import type pg from 'pg';
import type { Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { startGatewayProcess, setupOrgVia, type GatewayProcess } from '../support/gateway-process.js';
import { emulatorEnv, toolUse } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { leakedIn, openDb, postToolUse, rows, secretNeedles, waitFor } from './support.js';

/**
 * kill -9 of a gateway process, then a fresh process on the same database:
 * the ledger must account for every answered request, and a write whose
 * outcome died with the process must become `indeterminate`, never re-run.
 */
describe('crash: kill -9 of the gateway process', () => {
  let emu: VendorEmulator;
  let db: pg.Pool;
  const started: GatewayProcess[] = [];
  /** the orgs' agent and admin keys: secrets as much as the vendor credentials */
  const apiKeys: string[] = [];
  const start = async (env: Record<string, string>): Promise<GatewayProcess> => {
    const gw = await startGatewayProcess({ ...emulatorEnv(emu.url), ...env });
    started.push(gw);
    return gw;
  };
  /**
   * A restarted gateway, once the killed one's hold on its running calls has passed (each call carries it:
   * stale_after_ms, the VENDOR_TIMEOUT_MS + STALE_RUNNING_MARGIN_MS of the replica that started it, seconds here):
   * its start-up sweep takes them as orphaned. It does not before: as far as a sweep can tell, their owner may still
   * be at the vendor.
   */
  const restart = async (runId: string) => {
    await waitFor(
      async () => (await rows<{ n: number }>(db, `SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1 AND status = 'running'
                     AND started_at >= now() - make_interval(secs => stale_after_ms::double precision / 1000)`, [runId]))[0].n === 0,
      "the killed gateway's hold on its running calls to pass",
      30_000,
      100,
    );
    return start({ VENDOR_TIMEOUT_MS: '50', STALE_RUNNING_MARGIN_MS: '0' });
  };

  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    db = openDb();
  });
  afterAll(async () => {
    await Promise.all(started.map((g) => g.stop()));
    await db?.end();
    await emu?.stop();
  });

  it('a write in flight at the vendor becomes indeterminate after the restart, and re-posting it never runs it again', async () => {
    // Its calls held 8 s (VENDOR_TIMEOUT_MS, no margin): well past the kill, and the note's answer is 15 s away.
    const g1 = await start({ VENDOR_TIMEOUT_MS: '8000', STALE_RUNNING_MARGIN_MS: '0' });
    const org = await setupOrgVia(g1, { tools: ['shopify_order.add_note', 'order_lookup.lookup'] });
    apiKeys.push(org.agentKey, org.adminKey);
    const orderUpdates = () => emu.requests.filter((r) => r.vendor === 'shopify' && r.body.includes('orderUpdate'));
    // The vendor applies the note at once and answers 15 s later: the gateway dies in between.
    emu.fault({ vendor: 'shopify', bodyMatch: /orderUpdate/, kind: 'delay_after', delayMs: 15_000 });
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: 'crash-test note' });
    const inFlight = postToolUse(g1.http, org.runId, org.agentKey, use).then(
      (r) => r,
      (e: unknown) => e,
    );
    await waitFor(() => orderUpdates().some((r) => r.applied), 'the note to reach the vendor');
    const [before] = await rows<{ id: string; status: string }>(db, 'SELECT id, status FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2', [org.runId, use.id]);
    expect(before.status).toBe('running');

    // SIGKILL ends it, so stop() cannot: its /metrics for the run-wide scan now (the note has 15 s left at the vendor).
    await g1.logMetrics();
    g1.kill('SIGKILL');
    expect((await g1.waitExit()).signal).toBe('SIGKILL');
    const lost = await inFlight;
    expect(lost).toBeInstanceOf(Error); // the agent never got an answer

    const g2 = await restart(org.runId);
    const [after] = await rows<{ status: string; error_code: string }>(db, 'SELECT status, error_code FROM tool_calls WHERE id = $1', [before.id]);
    expect(after).toEqual({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN' });
    const events = await rows<{ type: string; metadata: { reason?: string } }>(
      db,
      'SELECT type, metadata FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq',
      [before.id],
    );
    expect(events.map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.indeterminate']);
    expect(events[2].metadata.reason).toBe('orphaned');

    for (let i = 0; i < 3; i++) {
      const again = await postToolUse(g2.http, org.runId, org.agentKey, use);
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ toolCallId: before.id, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', replayed: true });
      expect(again.body.toolResult.is_error).toBe(true);
    }
    const result = await g2.http.get(`/v1/tool-calls/${before.id}/result`).set(bearer(org.agentKey));
    expect(result.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    expect(orderUpdates()).toHaveLength(1);
    expect(orderUpdates().filter((r) => r.applied)).toHaveLength(1);
    await g2.stop();
  }, 90_000);

  it('during a burst of 100 reads: every answered call has its ledger row, and nothing stays running after the restart', async () => {
    const g3 = await start({ VENDOR_TIMEOUT_MS: '8000', STALE_RUNNING_MARGIN_MS: '0', VENDOR_CONCURRENCY_LIMIT: '500', DB_POOL_SIZE: '30' });
    const org = await setupOrgVia(g3, { tools: ['order_lookup.lookup'] });
    apiKeys.push(org.agentKey, org.adminKey);
    emu.reset();
    // Some lookups sit at the vendor when the process dies; the rest are answered at once.
    const held = 30;
    emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 5_000, times: held });

    const uses = Array.from({ length: 100 }, (_, i) => toolUse('order_lookup', { action: 'lookup', orderId: ['12345', '1001', '1002'][i % 3] }));
    // SIGKILL ends it, so stop() cannot: its /metrics for the run-wide scan now, before the burst, so that nothing
    // stands between the answer that triggers the kill and the kill.
    await g3.logMetrics();
    const answered: Response[] = [];
    let killed = false;
    const killAfter = 25;
    /** Reads still at the vendor the moment of the kill (the emulator is in this process: read synchronously). */
    let atVendor = 0;
    /** The 2xx whose arrival triggered the kill: the process dies within a millisecond or so of answering it. */
    let last: Response | undefined;
    const calls = uses.map((use) =>
      postToolUse(g3.http, org.runId, org.agentKey, use).then(
        (res) => {
          answered.push(res);
          if (!killed && answered.length >= killAfter) {
            // Synchronously on the answer (no await before it): calls answered just before, and the fast reads
            // still in the gateway, are cut at any point of their path. A gateway that answered before its row
            // committed (a write-behind outcome) would leave this answer without its row.
            killed = true;
            last = res;
            atVendor = emu.requests.filter((r) => r.vendor === 'shopify' && r.finishedAt === undefined).length;
            g3.kill('SIGKILL');
          }
          return res;
        },
        (err: unknown) => err as Error,
      ),
    );
    const outcomes = await Promise.all(calls);
    expect(killed, `only ${answered.length} calls were answered before the kill`).toBe(true);
    expect((await g3.waitExit()).signal).toBe('SIGKILL');
    // The process is dead: the rows still running are those it left running at the kill.
    const running = (await rows<{ id: string }>(db, 'SELECT id FROM tool_calls WHERE run_id = $1 AND status = $2', [org.runId, 'running'])).map((r) => r.id);
    // The kill cut reads off at the vendor, with their rows `running`: what the restart's sweep must settle.
    expect(atVendor, 'reads held at the vendor when the process was killed').toBeGreaterThan(0);
    expect(running.length, 'rows running when the process was killed').toBeGreaterThan(0);

    const ok = outcomes.filter((o): o is Response => !(o instanceof Error) && o.status >= 200 && o.status < 300);
    const failed = outcomes.filter((o) => o instanceof Error);
    expect(ok.length).toBeGreaterThanOrEqual(killAfter);
    expect(last !== undefined && last.status >= 200 && last.status < 300, 'the kill was triggered by a 2xx').toBe(true);
    // The kill cut off more than the reads held at the vendor: fast reads were in flight in the gateway too.
    expect(failed.length, `calls cut off by the kill (${held} were held at the vendor)`).toBeGreaterThan(held);

    await restart(org.runId);
    const ledger = await rows<{ id: string; tool_use_id: string; status: string }>(db, 'SELECT id, tool_use_id, status FROM tool_calls WHERE run_id = $1', [org.runId]);
    const byId = new Map(ledger.map((r) => [r.id, r]));
    for (const res of ok) {
      const row = byId.get(res.body.toolCallId as string);
      expect(row, `ledger row of answered call ${String(res.body.toolCallId)}`).toBeDefined();
      expect(row!.status).toBe(res.body.status);
      expect(row!.tool_use_id).toBe(res.body.toolResult.tool_use_id);
    }
    expect(ledger.filter((r) => r.status === 'running' || r.status === 'requested' || r.status === 'approved')).toEqual([]);
    // The calls running at the kill and never answered were settled by the restart's sweep (a fast read may still
    // have finished between the snapshot and the kill: only the ones the sweep settled are counted).
    const answeredIds = new Set(outcomes.flatMap((o) => (o instanceof Error ? [] : [o.body.toolCallId as string])));
    const cut = running.filter((id) => !answeredIds.has(id));
    const settledBySweep = cut.filter((id) => ['indeterminate', 'failed'].includes(byId.get(id)?.status ?? ''));
    expect(settledBySweep.length, `of ${cut.length} calls running at the kill: ${JSON.stringify(cut.map((id) => byId.get(id)?.status))}`).toBeGreaterThan(0);
    // Every row that exists has a terminal event; none is half-written.
    const [{ n }] = await rows<{ n: number }>(
      db,
      `SELECT count(*)::int AS n FROM tool_calls t WHERE t.run_id = $1 AND NOT EXISTS (
         SELECT 1 FROM runtime_ledger_events e WHERE e.tool_call_id = t.id
            AND e.type IN ('tool_call.succeeded', 'tool_call.failed', 'tool_call.indeterminate'))`,
      [org.runId],
    );
    expect(n).toBe(0);
    // At most one ledger row per tool_use, and never more vendor calls than rows that started.
    expect(new Set(ledger.map((r) => r.tool_use_id)).size).toBe(ledger.length);
    expect(emu.count({ vendor: 'shopify' })).toBeLessThanOrEqual(ledger.length);
  }, 90_000);

  it('the children wrote no secret to stdout or stderr', () => {
    expect(apiKeys.length).toBeGreaterThanOrEqual(2);
    for (const gw of started) expect(leakedIn(gw.output(), secretNeedles(apiKeys))).toEqual([]);
  });
});
