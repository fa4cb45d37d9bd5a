import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CredentialsService } from '../../src/credentials/credentials.service.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { call, rowOf } from './support.js';

/**
 * The executor's first step is loading the org's credentials (CredentialsService.loadStamped: a database read every
 * 1 s per org × vendor). README "Errors" table: EXECUTION_ERROR is "the gateway caught a bug; or its own database failed
 * before the request left (its token store, a refund's lease: nothing was sent, and a new call may work)"; the runbook
 * says an error line `tool execution threw` is a bug. The same database failing in the credentials check of a refund
 * (shopify-refunds.spec) is answered as the gateway's temporary problem; here it is the credentials load itself.
 */
describe('the database failing while the credentials are loaded for a call', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is the gateway\'s temporary trouble (nothing sent, a new call may work), not "the tool failed unexpectedly" logged as a bug', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const creds = h.t.app.get(CredentialsService);
    const spy = vi.spyOn(creds, 'loadStamped').mockRejectedValueOnce(Object.assign(new Error('Connection terminated unexpectedly'), { code: '57P01' }));
    const logsFrom = h.t.logs.length;
    try {
      const from = h.emu.requests.length;
      const res = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
      expect(spy).toHaveBeenCalledTimes(1);
      expect(h.emu.requests.length - from).toBe(0);
      const row = await rowOf(h, res.body.toolCallId as string);
      const bugLines = h.t.logs.slice(logsFrom).filter((l) => l.includes('tool execution threw'));
      // Not "The tool failed unexpectedly" with vendor_refused null and an error-level "tool execution threw" line
      // (the runbook's "a bug"): a warn line naming the call and what the database said.
      const warn = h.t.logs
        .slice(logsFrom)
        .flatMap((c) => c.split('\n'))
        .find((l) => l.includes('credentials could not be loaded (database unavailable)'));
      expect(warn && JSON.parse(warn)).toMatchObject({ level: 40, toolCallId: res.body.toolCallId, orgId: org.orgId, vendor: 'shopify', reason: 'database unavailable', code: '57P01' });
      expect({
        errorCode: res.body.errorCode,
        content: res.body.toolResult.content,
        vendorRefused: row.vendor_refused,
        bugLines: bugLines.length,
      }).toEqual({
        errorCode: 'EXECUTION_ERROR',
        content: 'The gateway could not run this action because of a temporary problem on its side; nothing was sent to the vendor. It may work later, as a new tool call.',
        vendorRefused: false,
        bugLines: 0,
      });
    } finally {
      spy.mockRestore();
    }
  });
});
