import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { startGatewayProcess, startPgServer, setupOrgVia, within, type GatewayProcess, type PgServerProcess } from '../support/gateway-process.js';
import { emulatorEnv, toolUse } from '../support/scenario.js';
import { postToolUse, waitFor } from './support.js';

/**
 * README "Stopping": a stop that lost what a vendor answered is not a clean one. A write is at the vendor when
 * PostgreSQL goes away and the gateway is told to stop: its outcome cannot be recorded before the process ends
 * (the orphan sweep later marks the call indeterminate, for an operator to reconcile). The process used to exit 0
 * all the same, and a supervisor or deploy tool reading the exit code saw a clean stop.
 */
describe('a stop with the database gone while a write is at the vendor', () => {
  let emu: VendorEmulator;
  let pgServer: PgServerProcess;
  let gw: GatewayProcess | undefined;

  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    pgServer = await startPgServer(`.tmp/pg-stop-db-gone-${process.pid}`);
  }, 90_000);
  afterAll(async () => {
    try {
      await gw?.stop();
      await pgServer?.startServer().catch(() => undefined);
      await pgServer?.close();
    } finally {
      await emu?.stop();
    }
  });

  it('exits 1 and says how many outcomes it did not record; the call is left running for the orphan sweep, and the vendor ran it once', async () => {
    gw = await startGatewayProcess({ ...emulatorEnv(emu.url), DATABASE_URL: pgServer.url, VENDOR_TIMEOUT_MS: '10000' });
    const org = await setupOrgVia(gw, { tools: ['shopify_order.add_note'] });
    emu.reset();
    emu.fault({ vendor: 'shopify', bodyMatch: /orderUpdate/, kind: 'delay_after', delayMs: 1_500, times: 1 });
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '1002', note: 'held while the database goes' });
    const answer = postToolUse(gw.http, org.runId, org.agentKey, use).then(
      (r) => r.status,
      () => null,
    );
    await waitFor(() => emu.requests.some((r) => r.body.includes('orderUpdate')), 'the write to reach the vendor');
    await pgServer.stopServer();
    gw.kill('SIGTERM');
    const exit = await within(gw.waitExit(), 60_000, 'the gateway to exit');
    const out = gw.output();
    expect(await answer).toBe(503);
    expect(out).toMatch(/outcome not recorded/);
    expect(out).toMatch(/shutdown: 1 outcome\(s\) not recorded \(the database was unavailable while stopping\)/);
    expect(exit).toEqual({ code: 1, signal: null });

    // What the ledger holds once the database is back: the call still running (the sweep's to settle), one update at the vendor.
    await pgServer.startServer();
    const db = new pg.Pool({ connectionString: pgServer.url, max: 1 });
    try {
      const { rows } = await db.query<{ status: string }>('SELECT status FROM tool_calls WHERE tool_use_id = $1', [use.id]);
      expect(rows).toEqual([{ status: 'running' }]);
    } finally {
      await db.end();
    }
    expect(emu.requests.filter((r) => r.body.includes('orderUpdate'))).toHaveLength(1);
  }, 120_000);
});
