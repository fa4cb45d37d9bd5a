import { afterAll, describe, expect, it } from 'vitest';
import { createFullEmulator } from '../../src/emulator/index.js';
import type { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
import { ToolCallsService } from '../../src/tool-calls/tool-calls.service.js';
import { emulatorEnv, setupOrg } from '../support/scenario.js';
import { bearer, createKey, startTestApp, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { refundUse } from './support.js';

/**
 * The start-up pass starts the calls approved before a restart without waiting for them: a replica
 * whose vendor is slow still starts (and serves /healthz) at once; shutdown still waits for those
 * calls to record their outcome.
 */
describe('start-up approvals pass', () => {
  const emu = createFullEmulator();
  const apps: TestApp[] = [];
  afterAll(async () => {
    for (const a of apps) await a.close().catch(() => undefined);
    await emu.stop();
  });

  it('does not hold start-up for the vendor calls it starts, and shutdown waits for them', async () => {
    await emu.start();
    const VENDOR_DELAY_MS = 5_000; // well under the 8 s vendor timeout
    const AMOUNT = '7.31'; // this call's refund, told apart from those of calls other files left approved in the shared database
    const env = { ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '8000', APPROVAL_TTL_SECONDS: '3600' };
    const first = await startTestApp(env);
    apps.push(first);
    const org = await setupOrg(first, { tools: ['shopify_refund.create'] });
    const expert = await createKey(first, org.orgId, 'expert');
    const res = await first.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(AMOUNT));
    expect(res.status).toBe(202);
    const callId = res.body.toolCallId as string;
    const list = await first.http.get('/v1/approvals?status=pending').set(bearer(expert.key));
    const approval = (list.body.items as { id: string; toolCallId: string; actionDigest: string }[]).find((a) => a.toolCallId === callId)!;
    // Approved while every slot is taken: it stays approved (as after a crash between the decision and the start).
    const calls = first.app.get(ToolCallsService);
    const held: (() => void)[] = [];
    for (let r = calls.leaseFor(org.orgId, 'shopify'); r; r = calls.leaseFor(org.orgId, 'shopify')) held.push(r);
    const decided = await first.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    await first.close();
    apps.length = 0;
    held.forEach((r) => r());
    const refunds = () => emu.vendor<ShopifyEmulator>('shopify').order('12345')!.refunds.filter((r) => r.amountCents === 731).length;
    expect(refunds()).toBe(0);

    // Only this call's refund is held (the start-up pass may also start calls other files left approved).
    const from = emu.requests.length;
    const thisRefund = () => emu.requests.slice(from).filter((r) => /refundCreate/.test(r.body) && r.body.includes(`"amount":"${AMOUNT}"`));
    emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: VENDOR_DELAY_MS, bodyMatch: new RegExp(`refundCreate[\\s\\S]*"amount":"${AMOUNT.replace('.', '\\.')}"`) });
    const second = await startTestApp(env);
    apps.push(second);
    // Start-up did not wait for the call it started: its refund, if sent yet, is still unanswered (an order of
    // events, not a wall-clock bound a loaded machine's slow start-up could break).
    expect(thisRefund().filter((r) => r.finishedAt !== undefined), 'the refund was unanswered when start-up returned').toEqual([]);
    expect((await second.http.get('/healthz')).status).toBe(200);
    const status = async (app: TestApp) => ((await app.ds.query('SELECT status FROM tool_calls WHERE id = $1', [callId])) as { status: string }[])[0]!.status;
    // Started by the start-up pass (it claims the call a moment after start-up), and at the vendor now.
    await waitFor(() => thisRefund().length === 1, 'the start-up pass to send the refund');
    expect(await status(second)).toBe('running');
    expect(thisRefund()[0]!.finishedAt, 'still at the vendor').toBeUndefined();

    // Shutdown waits for it: its outcome is recorded before the database closes.
    await second.close();
    apps.length = 0;
    const third = await startTestApp(env);
    apps.push(third);
    expect(await status(third)).toBe('succeeded');
    expect(refunds()).toBe(1);
  });
});
