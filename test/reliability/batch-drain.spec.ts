import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { startGatewayProcess, setupOrgVia, within, type GatewayProcess } from '../support/gateway-process.js';
import { emulatorEnv, toolUse } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { openDb, rows, waitFor } from './support.js';

/**
 * README "Stopping": SIGTERM drains — no new call is started, the calls already at a vendor finish
 * (at most VENDOR_TIMEOUT_MS) and docker-compose gives 30 s before SIGKILL. A batch of writes runs
 * its items one after another: it must not go on starting them during the drain, or the drain
 * lasts N × the vendor time and a SIGKILL lands while a write is at the vendor.
 */
describe('SIGTERM during a batch of writes', () => {
  let emu: VendorEmulator;
  let db: pg.Pool;
  let gw: GatewayProcess | undefined;

  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    db = openDb();
  });
  afterAll(async () => {
    await gw?.stop(1_000);
    await db?.end();
    await emu?.stop();
  });

  it('starts no further vendor write of a batch once SIGTERM arrived (drain bounded by one call, not by the batch)', async () => {
    gw = await startGatewayProcess({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '10000' });
    const org = await setupOrgVia(gw, { tools: ['shopify_order.add_note'] });
    await gw.logMetrics(); // a signal ends it below (stop() would find it dead): /metrics to the run log now, not during the drain
    emu.reset();
    // every orderUpdate is applied and then answered 1.5 s later
    emu.fault({ vendor: 'shopify', kind: 'delay_after', delayMs: 1_500, times: Infinity });
    const uses = Array.from({ length: 5 }, (_, i) => toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: `note ${i}` }));
    const batch = gw.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(org.agentKey)).send({ toolUses: uses }).then((r) => r);
    const notes = () => emu.requests.filter((r) => r.body.includes('orderUpdate')).length;
    await waitFor(() => notes() >= 1, 'the first note to reach the vendor');

    gw.kill('SIGTERM');
    const exit = await within(gw.waitExit(), 30_000, 'the gateway to exit');
    const res = await batch;
    const statuses = await rows<{ status: string }>(db, 'SELECT status FROM tool_calls WHERE run_id = $1 ORDER BY created_at', [org.runId]);

    expect(exit).toEqual({ code: 0, signal: null });
    // The write that was at the vendor finished and is recorded; nothing after it was sent or recorded.
    expect(notes()).toBe(1);
    expect(statuses).toEqual([{ status: 'succeeded' }]);
    // The batch is still answered, every item: the one that ran, and the others say they were not started.
    expect(res.status).toBe(200);
    expect(res.body.results).toHaveLength(5);
    expect(res.body.results[0]).toMatchObject({ status: 'succeeded' });
    for (const item of res.body.results.slice(1)) {
      expect(item).toMatchObject({ status: 503, code: 'GATEWAY_STOPPING', detail: expect.stringContaining('not started') });
    }
  }, 60_000);
});
