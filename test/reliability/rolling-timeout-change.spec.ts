import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { startGatewayProcess, setupOrgVia, within, type GatewayProcess } from '../support/gateway-process.js';
import { emulatorEnv, toolUse } from '../support/scenario.js';
import { openDb, postToolUse, rows, sleep, waitFor } from './support.js';

/**
 * A rolling deploy that changes VENDOR_TIMEOUT_MS (here lowered from 40 s to the default 15 s, STALE_RUNNING_MARGIN_MS
 * 10 s on both). The new replica's start-up orphan sweep judged the old, draining replica's call by its own timeout
 * and marked indeterminate a call its owner still had at the vendor, well inside the owner's budget: the write
 * succeeded, and the agent and every replay read it as unknown. A call now carries how long its owner may hold it
 * (tool_calls.stale_after_ms), and the sweep goes by that.
 */
describe('rolling: orphan sweep of a new replica vs a draining old one with a longer VENDOR_TIMEOUT_MS', () => {
  let emu: VendorEmulator;
  let db: pg.Pool;
  const gws: GatewayProcess[] = [];
  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    db = openDb();
  });
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.stop()));
    await db?.end();
    await emu?.stop();
  });

  it('a call the draining replica still has at the vendor (within its budget) is not marked indeterminate by the new replica', async () => {
    const a = await startGatewayProcess({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '40000', STALE_RUNNING_MARGIN_MS: '10000' });
    gws.push(a);
    const org = await setupOrgVia(a, { tools: ['shopify_order.add_note'] });
    emu.fault({ vendor: 'shopify', bodyMatch: /orderUpdate/, kind: 'delay_after', delayMs: 32_000, times: 1 });
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: 'rolling deploy note' });
    const answer = postToolUse(a.http, org.runId, org.agentKey, use).then((r) => r, (e: unknown) => e);
    await waitFor(() => emu.requests.some((r) => r.body.includes('orderUpdate')), 'the note to reach the vendor');
    await sleep(24_000); // 24 s into a 40 s budget: the owner still has it (B's threshold: 15 s + 10 s)
    await a.logMetrics();
    a.kill('SIGTERM'); // rolling deploy: A drains, the new release starts
    const b = await startGatewayProcess({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '15000', STALE_RUNNING_MARGIN_MS: '10000' });
    gws.push(b);
    const exit = await within(a.waitExit(), 50_000, 'A to exit');
    const res = (await answer) as { status?: number; body?: Record<string, unknown> };
    const [row] = await rows<{ status: string; error_code: string | null }>(db, 'SELECT status, error_code FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2', [org.runId, use.id]);
    expect({ exit, answered: res.body?.status, row }).toEqual({ exit: { code: 0, signal: null }, answered: 'succeeded', row: { status: 'succeeded', error_code: null } });
  }, 120_000);
});
